//! Plugins: finding them (manifests only), loading them (abi_stable), probing them in
//! isolated child processes, and selecting the runtime and harness.
//!
//! The host depends only on `stet-plugin-api`; no module here names a backend.

pub mod discovery;
pub mod install;
pub mod loader;
pub mod manifest;
pub mod probe;
pub mod selection;
pub mod survey;
pub mod trust;
pub mod version;

/// What finding, probing and building plugins needs of the settings.
#[derive(Debug, Clone)]
pub struct PluginSettings {
    /// Directories searched for plugins, in order.
    pub search_path: Vec<discovery::SearchDir>,
    /// Time limit for one plugin's probe.
    pub probe_timeout: std::time::Duration,
    /// Each plugin's settings table, as JSON.
    pub plugin_config: std::collections::BTreeMap<String, serde_json::Value>,
}

impl PluginSettings {
    /// The settings JSON handed to plugin `name` (`{}` when none).
    pub fn config_json(&self, name: &str) -> String {
        self.plugin_config
            .get(name)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "{}".to_string())
    }
}
