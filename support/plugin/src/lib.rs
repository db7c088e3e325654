//! Plumbing for stet's plugins and third parties' — the one support crate beside the SDK
//! (`stet-plugin-api`), as nushell's plugin test support sits beside its plugin crate: not
//! part of the plugin interface, and never needed to write a plugin. It holds what two
//! plugins would otherwise copy:
//!
//! - [`command`]: finding a host program, and running it to its end bounded in time,
//!   output and process group ([`command::run_bounded`], the one bounded run);
//! - for runtimes whose sandboxes are records on disk and whose processes are children of
//!   the plugin (a CLI launcher such as `bwrap`, `runc` or `container exec`, or plain host
//!   processes; `examples/runtime-plugin` is the template): [`records`], sandboxes as
//!   records under a state directory and the processes noted in each, so that a teardown
//!   from another stet process reaches them; [`process`], a host child process streamed
//!   live to the host, its stdin written then closed, killed by process group from any
//!   thread, reaped exactly once, and [`Processes`](process::Processes), the ones an
//!   instance started, per sandbox;
//! - for harnesses: [`private_dir`] (a profile directory only its owner may enter),
//!   [`url`] (an endpoint as a credential gateway names it), [`version_of`] (an agent
//!   CLI's `--version`) and [`read_untrusted`] (a file a sandbox could have written, read as
//!   data and no more).
//!
//! A runtime keeps the part that is its backend: the `Command` that runs a process in a
//! sandbox, what a sandbox is made of, the probe.

pub mod command;
pub mod private_dir;
pub mod process;
pub mod records;
pub mod url;

pub use command::{find_on_path, run_bounded, run_clean, Ran, RunError};

use std::path::Path;

/// The calling process's effective user and group ids: who processes run as by default.
pub fn current_ids() -> (u32, u32) {
    // SAFETY: plain syscalls without arguments.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Refuses a path a sandbox spec names (a mount's source or target, a working directory)
/// unless it is absolute and has no `..`: `what` names it in the error.
pub fn check_sandbox_path(what: &str, path: &str) -> Result<(), stet_plugin_api::PluginError> {
    let p = std::path::Path::new(path);
    if !p.is_absolute() || p.components().any(|c| c == std::path::Component::ParentDir) {
        return Err(stet_plugin_api::PluginError::invalid_input(format!(
            "{what} {path:?} is not an absolute path without `..`"
        )));
    }
    Ok(())
}

/// `base` with `extra` added, a name given in both taking `extra`'s value: a process's
/// environment, from its sandbox's and its own.
pub fn merged_env(base: &[(String, String)], extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = base
        .iter()
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
        .cloned()
        .collect();
    env.extend(extra.iter().cloned());
    env
}

/// What an agent's CLI answered to `BINARY --version` (`ran`), trimmed: the version a
/// harness's probe reports; or why it gave none, in words naming the binary.
pub fn version_of(binary: &Path, ran: Result<Ran, String>) -> Result<String, String> {
    match ran {
        Ok(out) if out.success() => Ok(out.stdout.trim().to_string()),
        Ok(out) => Err(format!(
            "`{} --version` exited with {:?}: {}",
            binary.display(),
            out.code,
            out.stderr.trim()
        )),
        Err(e) => Err(format!("`{} --version`: {e}", binary.display())),
    }
}

/// This machine as `os/arch` (`linux/x86_64`, `macos/aarch64`).
pub fn platform() -> String {
    format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// Reads a file a sandbox could have written, as data and no more: only a regular file is
/// read (a symbolic link is not followed: the file opened must be the very one looked at),
/// and at most `limit` bytes of it.
pub fn read_untrusted(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let looked = std::fs::symlink_metadata(path)?;
    if !looked.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if looked.len() > limit {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than the {limit} read",
            looked.len()
        )));
    }
    let file = std::fs::File::open(path)?;
    let opened = file.metadata()?;
    // Swapped for a link (or another file) between the look and the open.
    if (opened.dev(), opened.ino()) != (looked.dev(), looked.ino()) || !opened.is_file() {
        return Err(std::io::Error::other(
            "the file changed while it was opened",
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_env_is_added_to_the_sandbox_env() {
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            merged_env(&[s("A", "1"), s("B", "2")], &[s("B", "3"), s("C", "4")]),
            vec![s("A", "1"), s("B", "3"), s("C", "4")]
        );
    }
}
