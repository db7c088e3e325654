//! stet's Apple `container` runtime: drives Apple's `container` CLI, which runs each
//! sandbox as its own lightweight VM on macOS 26 and Apple silicon.
//!
//! The platform is checked first, before any command runs: on anything but macOS on
//! Apple silicon the probe says so and stops. The library is built for Linux too so that
//! a mixed fleet can ship one plugin set and `stet plugins probe` explains the requirement
//! instead of the plugin silently missing. This cut implements the probe.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use stet_plugin_api::{
    export_plugin, Label, PluginError, ProbeReport, ProcessPlugin, ProcessSpec, RuntimePlugin,
    SandboxInfo, SandboxSpec,
};
use stet_plugin_support::{find_on_path, platform, run_bounded};

/// The native backend on its platform: preferred over engines that run anywhere.
const PRIORITY: i32 = 100;

/// `container system status` answers within 10 s by itself; it has been seen to hang
/// forever (apple/container#2275), so it gets a wall-clock limit of its own.
const STATUS_LIMIT: Duration = Duration::from_secs(15);
const VERSION_LIMIT: Duration = Duration::from_secs(5);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The `container` executable; looked up on `PATH` when absent.
    binary: Option<PathBuf>,
}

/// The Apple container runtime.
pub struct AppleContainerRuntime {
    config: Config,
}

impl AppleContainerRuntime {
    /// Builds the runtime from its JSON settings.
    pub fn from_config(config: &str) -> Result<Self, PluginError> {
        let config: Config = serde_json::from_str(config).map_err(|e| {
            PluginError::invalid_input(format!("bad [plugins.apple-container] settings: {e}"))
                .with_remedy("the only key is `binary`, the path of the `container` executable")
        })?;
        Ok(AppleContainerRuntime { config })
    }

    fn binary(&self) -> Option<PathBuf> {
        self.config.binary.clone().or_else(|| {
            let path = std::env::var_os("PATH").unwrap_or_default();
            find_on_path("container", &path).or_else(|| {
                find_on_path("container", OsStr::new("/usr/local/bin:/opt/homebrew/bin"))
            })
        })
    }
}

fn supported_platform() -> bool {
    cfg!(target_os = "macos") && cfg!(target_arch = "aarch64")
}

impl RuntimePlugin for AppleContainerRuntime {
    fn probe(&self) -> Result<ProbeReport, PluginError> {
        if !supported_platform() {
            return Ok(ProbeReport::unavailable(
                format!(
                    "needs macOS 26 on Apple silicon; this machine is {}",
                    platform()
                ),
                "run stet on a Mac with Apple silicon and macOS 26",
            )
            .with_fact("platform", platform()));
        }
        let Some(binary) = self.binary() else {
            return Ok(ProbeReport::unavailable(
                "the `container` CLI is not on PATH",
                "install Apple's container tool (the signed .pkg from its releases, or Homebrew) \
                 and run `container system start`",
            ));
        };
        let env: [(&str, &OsStr); 1] = [("PATH", OsStr::new("/usr/bin:/bin:/usr/sbin:/sbin"))];
        let version = match run_bounded(&binary, ["--version"], &env, VERSION_LIMIT) {
            Ok(out) if out.success() => parse_version(&out.stdout),
            Ok(out) => {
                return Ok(ProbeReport::unavailable(
                    format!(
                        "`{} --version` failed: {}",
                        binary.display(),
                        out.stderr.trim()
                    ),
                    "reinstall Apple's container tool",
                ))
            }
            Err(e) => {
                return Ok(ProbeReport::unavailable(
                    format!("`{} --version`: {e}", binary.display()),
                    "reinstall Apple's container tool",
                ))
            }
        };
        let status_args: [OsString; 2] = ["system".into(), "status".into()];
        match run_bounded(&binary, status_args, &env, STATUS_LIMIT) {
            Ok(out) if out.success() => Ok(ProbeReport::available(
                format!("container {version}"),
                PRIORITY,
            )
            .with_fact("binary", binary.display().to_string())
            .with_fact("platform", platform())),
            Ok(_) => Ok(ProbeReport::unavailable(
                format!("container {version} is installed but its system service is not running"),
                "run `container system start --enable-kernel-install`",
            )),
            Err(e) => Ok(ProbeReport::unavailable(
                format!("`container system status`: {e}"),
                "restart the service: `container system stop && container system start`",
            )),
        }
    }

    fn create_sandbox(&self, _spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        Err(not_yet("create_sandbox"))
    }

    fn spawn(
        &self,
        _sandbox: &str,
        _spec: ProcessSpec,
    ) -> Result<Box<dyn ProcessPlugin>, PluginError> {
        Err(not_yet("spawn"))
    }

    fn teardown(&self, _sandbox: &str) -> Result<(), PluginError> {
        Err(not_yet("teardown"))
    }

    fn list_sandboxes(&self, _labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
        Err(not_yet("list_sandboxes"))
    }
}

/// `container CLI version 1.2.2 (build: release, commit: 0000000)` → `1.2.2`.
fn parse_version(text: &str) -> String {
    text.split_whitespace()
        .skip_while(|word| *word != "version")
        .nth(1)
        .unwrap_or("unknown")
        .to_string()
}

fn not_yet(operation: &str) -> PluginError {
    stet_plugin_support::not_yet("apple-container", env!("CARGO_PKG_VERSION"), operation)
}

export_plugin!(
    runtime,
    name = "apple-container",
    version = env!("CARGO_PKG_VERSION"),
    new = AppleContainerRuntime::from_config
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cli_version_line() {
        assert_eq!(
            parse_version("container CLI version 1.2.2 (build: release, commit: 0000000)\n"),
            "1.2.2"
        );
        assert_eq!(parse_version("garbage"), "unknown");
    }

    #[test]
    #[cfg(not(all(target_os = "macos", target_arch = "aarch64")))]
    fn probe_names_the_platform_requirement_off_apple_silicon() {
        let report = AppleContainerRuntime::from_config("{}")
            .unwrap()
            .probe()
            .unwrap();
        assert!(!report.available);
        assert!(
            report.reason.contains("macOS 26 on Apple silicon"),
            "{}",
            report.reason
        );
    }
}
