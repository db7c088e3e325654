//! The Docker CLI as a child process: every stand-in container is a real Docker container.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::errors::{cz, CliError, Code};

/// Every Docker object the stand-in creates carries this label.
pub const MARKER: &str = "stet.stand-in";
/// The state directory the object belongs to.
pub const STATE_LABEL: &str = "stet.stand-in.state";
/// The stand-in container ID.
pub const ID_LABEL: &str = "stet.stand-in.id";
/// User labels are copied with this prefix (never as-is: stet's own `stet.*` labels on a
/// Docker container would look like a sandbox of stet's Docker runtime).
pub const LABEL_PREFIX: &str = "stet.stand-in.label.";

pub struct Docker {
    pub bin: PathBuf,
}

/// FNV-1a of the state directory: keeps Docker names of different stand-ins apart.
pub fn state_tag(state_dir: &Path) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in state_dir.to_string_lossy().as_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

impl Docker {
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.stdin(Stdio::null());
        c
    }

    pub fn output(&self, args: &[String]) -> Result<Output, CliError> {
        self.command()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| {
                cz(
                    Code::InternalError,
                    format!("stand-in: cannot run {}: {e}", self.bin.display()),
                )
            })
    }

    /// Runs docker; stdout on success, a stand-in error with docker's stderr otherwise.
    pub fn ok(&self, args: &[String]) -> Result<String, CliError> {
        let out = self.output(args)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(docker_failure(args, &out))
        }
    }

    pub fn image(&self, reference: &str) -> Option<Value> {
        let out = self
            .output(&["image".into(), "inspect".into(), reference.into()])
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v.as_array()?.first().cloned()
    }

    /// `docker inspect` of these containers, by name (missing ones are absent).
    pub fn containers(&self, names: &[String]) -> HashMap<String, Value> {
        let mut map = HashMap::new();
        if names.is_empty() {
            return map;
        }
        let mut args = vec!["container".to_string(), "inspect".into()];
        args.extend(names.iter().cloned());
        let Ok(out) = self.output(&args) else {
            return map;
        };
        if let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(&out.stdout) {
            for item in items {
                if let Some(name) = item.get("Name").and_then(Value::as_str) {
                    map.insert(name.trim_start_matches('/').to_string(), item);
                }
            }
        }
        map
    }

    pub fn running(info: &Value) -> bool {
        info.pointer("/State/Running")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    pub fn pid(info: &Value) -> Option<i32> {
        info.pointer("/State/Pid")
            .and_then(Value::as_i64)
            .filter(|p| *p > 0)
            .map(|p| p as i32)
    }
}

pub fn docker_failure(args: &[String], out: &Output) -> CliError {
    let stderr = String::from_utf8_lossy(&out.stderr);
    cz(
        Code::InternalError,
        format!(
            "stand-in: docker {} failed: {}",
            args.first().map(String::as_str).unwrap_or(""),
            stderr.trim()
        ),
    )
}
