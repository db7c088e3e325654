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

use crate::error::Concept;

/// What finding, probing and building plugins needs of the settings.
#[derive(Debug, Clone)]
pub struct PluginSettings {
    /// Directories searched for plugins, in order.
    pub search_path: Vec<discovery::SearchDir>,
    /// Time limit for one plugin's probe.
    pub probe_timeout: std::time::Duration,
    /// Each plugin's settings table, as JSON.
    pub plugin_config: std::collections::BTreeMap<String, serde_json::Value>,
    /// Where each plugin's table came from: the file, and each key's line in it.
    pub plugin_origin: std::collections::BTreeMap<
        String,
        (
            std::path::PathBuf,
            std::collections::BTreeMap<String, usize>,
        ),
    >,
    /// Plugins whose only table is in an untrusted repository file, which was not applied:
    /// name → that file. A plugin that is unusable without its table says this as the cause.
    pub untrusted_tables: std::collections::BTreeMap<String, std::path::PathBuf>,
}

impl PluginSettings {
    /// Checks plugin `manifest`'s table against the settings its manifest declares (when
    /// it declares them): an unknown key or a value of the wrong type is named by its file,
    /// line and key, before the plugin is handed anything.
    pub fn check(&self, manifest: &manifest::Manifest) -> Result<(), crate::error::Error> {
        let (Some(declared), Some(serde_json::Value::Object(table))) = (
            manifest.settings.as_ref(),
            self.plugin_config.get(&manifest.name),
        ) else {
            return Ok(());
        };
        let name = &manifest.name;
        let place = |key: &str| match self.plugin_origin.get(name) {
            Some((file, lines)) => match lines.get(key) {
                Some(line) => format!("{}:{line}: ", file.display()),
                None => format!("{}: ", file.display()),
            },
            None => String::new(),
        };
        for (key, value) in table {
            let Some(ty) = declared.get(key) else {
                let known: Vec<&str> = declared.keys().map(String::as_str).collect();
                let closest = known
                    .iter()
                    .map(|k| (strsim::jaro_winkler(key, k), *k))
                    .filter(|(score, _)| *score > 0.8)
                    .max_by(|a, b| a.0.total_cmp(&b.0));
                let error = Concept::Plugins.usage(format!(
                    "{}key `plugins.{name}.{key}`: plugin {name} has no such setting (its settings: {})",
                    place(key),
                    known.join(", ")
                ));
                return Err(match closest {
                    Some((_, k)) => error.hint(format!("did you mean `{k}`?")),
                    None => error.hint(format!(
                        "the settings of {name} are described in its documentation; remove the key or fix its name"
                    )),
                });
            };
            if !ty.accepts(value) {
                return Err(Concept::Plugins.usage(format!(
                    "{}key `plugins.{name}.{key}`: expected {}, found {}",
                    place(key),
                    ty.words(),
                    manifest::shape_of(value)
                ))
                .hint("fix the value named above; a plugin's settings are described in its documentation"));
            }
        }
        Ok(())
    }

    /// The settings JSON handed to plugin `name` (`{}` when none).
    pub fn config_json(&self, name: &str) -> String {
        self.plugin_config
            .get(name)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "{}".to_string())
    }
}
