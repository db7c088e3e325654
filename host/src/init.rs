//! `stet init`: setting a repository up for stet. Pure parts here (what the check command
//! is guessed to be, the commented `stet.toml`); `cli/init.rs` finds the plugins and
//! writes the files.

use std::path::Path;

/// A check command guessed from a repository's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guess {
    /// The command (`[drive] check`).
    pub command: String,
    /// The file it was guessed from.
    pub from: &'static str,
}

/// The check command the repository's build files suggest, first match wins: Cargo.toml,
/// package.json (only with a `test` script that is not npm's placeholder), pyproject.toml,
/// go.mod, a Makefile with a `test` (else `check`) target.
pub fn guess_check(root: &Path) -> Option<Guess> {
    let has = |name: &str| root.join(name).is_file();
    let guess = |command: &str, from| {
        Some(Guess {
            command: command.to_string(),
            from,
        })
    };
    if has("Cargo.toml") {
        return guess("cargo test", "Cargo.toml");
    }
    if npm_test(&root.join("package.json")) {
        return guess("npm test", "package.json");
    }
    if has("pyproject.toml") {
        return guess("python3 -m pytest", "pyproject.toml");
    }
    if has("go.mod") {
        return guess("go test ./...", "go.mod");
    }
    for makefile in ["GNUmakefile", "makefile", "Makefile"] {
        // The repository is anyone's: read bounded, without following a link.
        let Ok(bytes) = crate::files::read_untrusted(&root.join(makefile), 1 << 20) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for target in ["test", "check"] {
            if text.lines().any(|l| {
                l.starts_with(&format!("{target}:")) || l.starts_with(&format!("{target} :"))
            }) {
                let from = match makefile {
                    "GNUmakefile" => "GNUmakefile",
                    "makefile" => "makefile",
                    _ => "Makefile",
                };
                return guess(&format!("make {target}"), from);
            }
        }
    }
    None
}

/// Whether `package.json` has a real `test` script.
fn npm_test(path: &Path) -> bool {
    let Ok(bytes) = crate::files::read_untrusted(path, 4 << 20) else {
        return false;
    };
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return false;
    };
    json.pointer("/scripts/test")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|t| !t.contains("no test specified"))
}

/// A plugin `stet init` found for a kind, or why none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Its name, version and why it was chosen.
    Chosen {
        name: String,
        version: String,
        why: String,
    },
    /// None usable: why.
    None(String),
}

/// What `stet init` writes.
pub struct Setup<'a> {
    /// The harness found.
    pub harness: &'a Found,
    /// The runtime found.
    pub runtime: &'a Found,
    /// The image sandboxes start from.
    pub image: &'a str,
    /// The check command, when one was guessed.
    pub check: Option<&'a Guess>,
}

/// The commented `stet.toml`.
pub fn config_text(setup: &Setup<'_>) -> String {
    let mut out = String::from(
        "# stet.toml: how stet works on this repository. Written by `stet init`; every key is\n\
         # described in stet's docs/configuration.md. Settings that act on your machine, choose\n\
         # the plugins or widen a sandbox ([drive] land, [runtime] and [harness] prefer,\n\
         # [plugins.*], [network] allow) apply only while this file's content is trusted:\n\
         # stet init trusted it as written, in this clone; after a change, or in another\n\
         # clone, `stet trust` (after reading it).\n",
    );
    let plugin = |out: &mut String, table: &str, kind: &str, found: &Found| {
        out.push_str(&format!("\n[{table}]\n"));
        match found {
            Found::Chosen { name, version, why } => {
                out.push_str(&format!(
                    "# Found by stet init: {name} {version} ({why}).\nprefer = [\"{name}\"]\n"
                ));
            }
            Found::None(why) => {
                out.push_str(&format!(
                    "# stet init found no usable {kind}: {why}.\n# `stet plugins probe` says why; then name it here (`stet plugins list` has the names):\n# prefer = [\"NAME\"]\n"
                ));
            }
        }
    };
    plugin(&mut out, "harness", "harness", setup.harness);
    plugin(&mut out, "runtime", "runtime", setup.runtime);
    out.push_str(&format!(
        "\n[sandbox]\n\
         # The image every sandbox starts from: it needs sh and git, and whatever the check\n\
         # runs. stet-lane:1 holds git only (scripts/build-image.sh); to use your own toolchain\n\
         # image, see \"Your own image\" in docs/configuration.md.\n\
         image = \"{}\"\n",
        setup.image
    ));
    out.push_str("\n[drive]\n");
    match setup.check {
        Some(guess) => out.push_str(&format!(
            "# Run in a sandbox on each lane before review. Guessed from {}; change it to\n\
             # what proves a change here.\n\
             check = \"{}\"\n",
            guess.from,
            guess.command.replace('\\', "\\\\").replace('"', "\\\"")
        )),
        None => out.push_str(
            "# Run in a sandbox on each lane before review; stet init could not guess it.\n\
             # check = \"make test\"\n",
        ),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn the_check_is_guessed_from_the_first_build_file_found() {
        type Files<'a> = &'a [(&'a str, &'a str)];
        let cases: [(Files, Option<(&str, &str)>); 8] = [
            (
                &[("Cargo.toml", ""), ("Makefile", "test:\n")],
                Some(("cargo test", "Cargo.toml")),
            ),
            (
                &[("package.json", r#"{"scripts":{"test":"jest"}}"#)],
                Some(("npm test", "package.json")),
            ),
            (
                &[(
                    "package.json",
                    r#"{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"}}"#,
                )],
                None,
            ),
            (
                &[("pyproject.toml", "")],
                Some(("python3 -m pytest", "pyproject.toml")),
            ),
            (
                &[("go.mod", "module x\n")],
                Some(("go test ./...", "go.mod")),
            ),
            (
                &[("Makefile", "all:\n\ncheck:\n\tx\n")],
                Some(("make check", "Makefile")),
            ),
            (&[("Makefile", "all:\n")], None),
            (&[("README.md", "")], None),
        ];
        for (files, expected) in cases {
            let dir = repo(files);
            let got = guess_check(dir.path());
            assert_eq!(
                got.as_ref().map(|g| (g.command.as_str(), g.from)),
                expected,
                "{files:?}"
            );
        }
    }

    #[test]
    fn the_config_names_what_was_found_and_parses() {
        let harness = Found::Chosen {
            name: "an-agent".into(),
            version: "0.1.0".into(),
            why: "highest priority".into(),
        };
        let runtime = Found::None("its engine does not answer".into());
        let check = Guess {
            command: "cargo test".into(),
            from: "Cargo.toml",
        };
        let text = config_text(&Setup {
            harness: &harness,
            runtime: &runtime,
            image: "stet-lane:1",
            check: Some(&check),
        });
        assert!(
            text.contains(
                "# Found by stet init: an-agent 0.1.0 (highest priority).\nprefer = [\"an-agent\"]"
            ),
            "{text}"
        );
        assert!(text.contains("# prefer = [\"NAME\"]"), "{text}");
        assert!(text.contains("Guessed from Cargo.toml"), "{text}");
        let parsed = crate::config::parse(Path::new("stet.toml"), &text).unwrap();
        assert_eq!(parsed.drive_check.as_deref(), Some("cargo test"));
        assert_eq!(parsed.harness_prefer, Some(vec!["an-agent".to_string()]));
        assert_eq!(parsed.runtime_prefer, None);
        assert_eq!(parsed.sandbox_image.as_deref(), Some("stet-lane:1"));
    }
}
