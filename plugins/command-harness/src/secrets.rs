//! A configured credential's secret, read on the host at each call (`credentials` in
//! `[plugins.command]`). It goes into the launch's variable only for the host to take it out
//! again: the host puts a stand-in there before the sandbox is made, and its gateway for the
//! credential's host swaps the secret back in on the way out. Never logged or printed: an
//! error names the source, not what it held.

use std::ffi::OsStr;
use std::time::Duration;

use stet_plugin_api::PluginError;

use crate::config::From;

/// How long a credential command may take (`gh auth token`, `op read ...`).
const COMMAND_LIMIT: Duration = Duration::from_secs(30);

/// The largest secret read from a file.
const FILE_LIMIT: u64 = 64 * 1024;

/// Reads the secret `from` names, for the credential `variable`.
pub fn read(variable: &str, from: &From) -> Result<String, PluginError> {
    let failed = |why: String| {
        PluginError::invalid_input(format!("cannot read the credential for {variable}: {why}"))
            .with_remedy("fix its `from` under [plugins.command] credentials")
    };
    let secret = match from {
        From::Env(name) => std::env::var(name)
            .map_err(|_| failed(format!("{name} is not set in stet's environment")))?,
        From::File(path) => {
            let path = expand_home(path);
            let bytes = stet_plugin_support::read_untrusted(&path, FILE_LIMIT)
                .map_err(|e| failed(format!("{}: {e}", path.display())))?;
            String::from_utf8(bytes)
                .map_err(|_| failed(format!("{} is not text", path.display())))?
        }
        From::Command(argv) => {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let program = if argv[0].contains('/') {
                std::path::PathBuf::from(&argv[0])
            } else {
                stet_plugin_support::find_on_path(&argv[0], &path)
                    .ok_or_else(|| failed(format!("`{}` is not on PATH", argv[0])))?
            };
            let home = std::env::var_os("HOME").unwrap_or_default();
            // An environment from scratch: what such commands need to find their own login.
            let env: [(&str, &OsStr); 2] = [("PATH", &path), ("HOME", &home)];
            let out = stet_plugin_support::run_clean(&program, &argv[1..], &env, COMMAND_LIMIT)
                .map_err(|e| failed(format!("`{}` did not run: {e}", argv.join(" "))))?;
            if !out.success() {
                // Its output is not shown: a helper may print the secret before failing.
                return Err(failed(format!(
                    "`{}` exited with {:?} (run it yourself to see why)",
                    argv.join(" "),
                    out.code
                )));
            }
            out.stdout
        }
    };
    let secret = secret.trim_end_matches(['\n', '\r']).to_string();
    if secret.is_empty() || secret.chars().any(|c| c.is_control()) {
        return Err(failed(
            "it is empty or holds control characters".to_string(),
        ));
    }
    Ok(secret)
}

fn expand_home(path: &std::path::Path) -> std::path::PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(rest)
        }
        Err(_) => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_and_a_command_are_read_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "from-a-file-0123456789\n").unwrap();
        assert_eq!(
            read("T", &From::File(file)).unwrap(),
            "from-a-file-0123456789"
        );
        let said = read(
            "T",
            &From::Command(vec![
                "/bin/sh".into(),
                "-c".into(),
                "echo from-a-command".into(),
            ]),
        )
        .unwrap();
        assert_eq!(said, "from-a-command");
    }

    #[test]
    fn a_failing_source_names_itself_and_never_what_it_printed() {
        let e = read(
            "T",
            &From::Command(vec![
                "/bin/sh".into(),
                "-c".into(),
                "printf the-; echo secret; echo no login >&2; exit 3".into(),
            ]),
        )
        .unwrap_err();
        assert!(
            e.message.contains("exited with Some(3) (run it yourself"),
            "{}",
            e.message
        );
        assert!(!e.message.contains("the-secret"));
        let e = read("T", &From::Env("STET_TEST_SURELY_UNSET_VARIABLE".into())).unwrap_err();
        assert!(e.message.contains("is not set"), "{}", e.message);
    }
}
