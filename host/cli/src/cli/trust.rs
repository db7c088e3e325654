//! `stet trust`: trust the repository's `stet.toml` as it is now, so that its settings that
//! act on the host or widen a sandbox take effect (see `trust.rs`).

use super::error::{CliError, Exit};
use crate::config::{self, REPO_CONFIG_FILE};
use crate::printer::Printer;

use super::TrustRepoArgs;

pub fn run(args: &TrustRepoArgs, printer: Printer) -> Result<Exit, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failure(format!("cannot resolve the current directory: {e}")))?;
    let root = config::repository_root(&cwd).ok_or_else(|| {
        CliError::usage(format!("{} is not inside a git repository", cwd.display()))
            .hint("cd into the repository whose stet.toml you mean to trust")
    })?;
    let path = root.join(REPO_CONFIG_FILE);
    let file = config::read_repository(&root, &path)
        .map_err(|e| {
            CliError::usage(format!("{} cannot be trusted", path.display()))
                .caused_by(e.to_string())
                .hint("fix the file first; a file stet cannot read is never trusted")
        })?
        .ok_or_else(|| {
            CliError::usage(format!("there is no {} to trust", path.display()))
                .hint("settings of your own belong in ~/.config/stet/config.toml, which is always trusted")
        })?;
    let store = crate::trust::persons_store().map_err(CliError::failure)?;
    if args.diff {
        return diff(&path, &store, &file.content, args.json, printer);
    }
    crate::trust::record(&store, &path, &file.content, args.revoke)
        .map_err(|e| CliError::failure(format!("cannot write {}: {e}", store.display())))?;
    let mut gated: Vec<String> = Vec::new();
    for (section, prefer) in [
        ("runtime", &file.runtime_prefer),
        ("harness", &file.harness_prefer),
    ] {
        if let Some(order) = prefer {
            gated.push(format!("[{section}] prefer = {order:?}"));
        }
    }
    if let Some(jobs) = file.drive_jobs {
        gated.push(format!("[drive] jobs = {jobs}"));
    }
    if let Some(land) = &file.drive_land {
        gated.push(format!(
            "[drive] land = {land:?} (runs on this machine, as you)"
        ));
    }
    if let Some(profiles) = &file.profiles_root {
        gated.push(format!("[harness] profiles = {}", profiles.display()));
    }
    for name in file.plugins.keys() {
        gated.push(format!("[plugins.{name}]"));
    }
    if args.json {
        #[derive(serde::Serialize)]
        struct Report<'a> {
            file: String,
            trusted: bool,
            /// The settings that apply only while the file is trusted, as it spells them.
            gated: &'a [String],
        }
        printer.json(&Report {
            file: path.display().to_string(),
            trusted: !args.revoke,
            gated: &gated,
        });
        return Ok(Exit::Success);
    }
    if args.revoke {
        printer.out(&format!(
            "{} is no longer trusted: its land command, profile, plugin tables and preferences are ignored",
            path.display()
        ));
    } else {
        printer.out(&format!(
            "trusted {} as it is now (sha256 recorded in {}); a change to it is untrusted again",
            path.display(),
            store.display()
        ));
        for line in gated {
            printer.out(&format!("  now applies: {line}"));
        }
    }
    Ok(Exit::Success)
}

/// `stet trust --diff`: what changed in `path` (holding `now`) since it was trusted, as a
/// unified diff on stdout; trusts nothing.
fn diff(
    path: &std::path::Path,
    store: &std::path::Path,
    now: &[u8],
    json: bool,
    printer: Printer,
) -> Result<Exit, CliError> {
    let then = match crate::trust::trusted_content(store, path) {
        Some(then) => then,
        // Trusted by a stet that kept no copy: the content is the same, so nothing changed.
        None if crate::trust::is_trusted(store, path, now) => now.to_vec(),
        None => {
            return Err(CliError::usage(format!(
                "{} was never trusted here (or by a stet that kept no copy of it), so there is nothing to compare it with",
                path.display()
            ))
            .hint("read the whole file, then stet trust"))
        }
    };
    let (then, now) = (String::from_utf8_lossy(&then), String::from_utf8_lossy(now));
    let text = similar::TextDiff::from_lines(then.as_ref(), now.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{REPO_CONFIG_FILE} (trusted)"),
            &format!("{REPO_CONFIG_FILE} (now)"),
        )
        .to_string();
    if json {
        #[derive(serde::Serialize)]
        struct Report {
            file: String,
            changed: bool,
            diff: String,
        }
        printer.json(&Report {
            file: path.display().to_string(),
            changed: !text.is_empty(),
            diff: text,
        });
    } else if text.is_empty() {
        printer.out(&format!(
            "{} is as it was trusted: nothing changed",
            path.display()
        ));
    } else {
        // The file is anyone's: the diff goes through the printer, made inert.
        printer.out(text.trim_end());
        printer.note("stet trust trusts it as it is now (after reading all of it)");
    }
    Ok(Exit::Success)
}
