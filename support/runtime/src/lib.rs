//! Plumbing for stet runtime plugins whose sandboxes are records on disk and whose
//! processes are children of the plugin: a CLI launcher such as `bwrap`, `runc` or
//! `container exec`, or plain host processes.
//!
//! This crate sits beside the SDK (`stet-plugin-api`), as nushell's plugin test support
//! sits beside its plugin crate: not part of the plugin interface, and not needed by a
//! runtime with a backend that keeps its own sandboxes (a container engine, a VM
//! manager). It holds what such a runtime would otherwise copy from the template in
//! `examples/runtime-plugin`, so that the template and the runtimes made from it
//! (`examples/bubblewrap-runtime`) share one copy:
//!
//! - [`records`]: sandboxes as records under a state directory, and the processes noted
//!   in each, so that a teardown from another stet process reaches them;
//! - [`command`]: finding a host program, and running it to its end with a time limit;
//! - [`process`]: a host child process streamed live to the host, its stdin written then
//!   closed, killed by process group from any thread, reaped exactly once; and
//!   [`Processes`](process::Processes), the ones an instance started, per sandbox.
//!
//! A runtime keeps the part that is its backend: the `Command` that runs a process in a
//! sandbox, what a sandbox is made of, the probe.

pub mod command;
pub mod process;
pub mod records;

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
