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
    /// The setup that prepares each lane for it (`[lane]`), when stet knows the toolchain's
    /// way: a Python project's virtual environment with its test dependencies.
    pub setup: Option<crate::config::Setup>,
}

/// A toolchain a guessed check runs that stet's lane image (sh, coreutils, git: Debian
/// bookworm, `scripts/build-image.sh`) lacks, and the Debian packages that bring it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toolchain {
    /// A short name, in the image's tag (`stet-lane-rust:1`).
    pub name: &'static str,
    /// What `apt-get install` adds to the lane image.
    pub packages: &'static str,
}

impl Guess {
    /// The toolchain the check needs beyond the lane image, by the file it was guessed from.
    pub fn toolchain(&self) -> Toolchain {
        let (name, packages) = match self.from {
            // Debian bookworm's own cargo (0.66) predates crates.io's sparse index; its
            // `cargo-web` (kept current for the browsers) is a recent toolchain, with the C
            // compiler and headers build scripts link with.
            "Cargo.toml" => ("rust", "cargo-web gcc libc6-dev"),
            "package.json" => ("node", "nodejs npm"),
            // With a setup, pytest and the rest come from the seed's environment.
            "pyproject.toml" if self.setup.is_some() => ("python", "python3 python3-venv"),
            "pyproject.toml" => ("python", "python3 python3-pytest"),
            "go.mod" => ("go", "golang-go"),
            _ => ("make", "make"),
        };
        Toolchain { name, packages }
    }
}

/// Where `stet init` writes the recipe of the image a guessed check runs in, relative to the
/// repository root. A file, not only a printed recipe: committed beside `stet.toml`, every
/// clone builds the same image under the tag `stet.toml` names. A Containerfile (the name
/// every OCI builder takes with `-f`) in `.stet/`, which is also the build context: the
/// image needs nothing of the repository, whose files each lane mounts.
pub const CONTAINERFILE: &str = ".stet/Containerfile";

/// The image a check with `toolchain` runs in, made from `base` (stet's lane image): its tag.
pub fn toolchain_tag(toolchain: &Toolchain) -> String {
    format!("stet-lane-{}:1", toolchain.name)
}

/// The Containerfile of [`toolchain_tag`]: `base` plus the toolchain's Debian packages. No
/// `USER`, `ENTRYPOINT` or environment: stet gives every process its own.
pub fn containerfile(base: &str, guess: &Guess, build: &str) -> String {
    let toolchain = guess.toolchain();
    format!(
        "# {CONTAINERFILE}: the image stet's sandboxes start from on this repository (stet.toml's\n\
         # [sandbox] image): stet's lane image ({base}: sh, coreutils, git) with what the check\n\
         # `{check}` runs (guessed by stet init from {from}). Add what your tests need.\n\
         # Build it once on each machine that drives, from the repository root:\n\
         #   {build}\n\
         FROM {base}\n\
         RUN apt-get update \\\n \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {packages} \\\n \
         && rm -rf /var/lib/apt/lists/*\n",
        check = one_line(&guess.command),
        from = one_line(guess.from),
        build = one_line(build),
        packages = toolchain.packages,
    )
}

/// The command that builds `tag` from [`CONTAINERFILE`], by the runtime's template
/// (`image_build` in its manifest), or in words when it gives none.
pub fn build_command(template: &str, tag: &str) -> String {
    let dir = CONTAINERFILE.rsplit_once('/').map_or(".", |(d, _)| d);
    if template.is_empty() {
        return format!(
            "your runtime's image build, tagged {tag}, of {CONTAINERFILE} with {dir} as its context"
        );
    }
    template
        .replace("{tag}", tag)
        .replace("{file}", CONTAINERFILE)
        .replace("{dir}", dir)
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
            setup: None,
        })
    };
    if has("Cargo.toml") {
        return Some(rust(root));
    }
    if npm_test(&root.join("package.json")) {
        return guess("npm test", "package.json");
    }
    if has("pyproject.toml") {
        return Some(python(root));
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

/// A Rust project's check and setup: the setup fetches the dependencies from crates.io
/// into a `CARGO_HOME` of the lane's (`.cargo-home`) and builds the tests once (`target`);
/// the check runs them offline, at the setup's path, where cargo finds what it built.
fn rust(root: &Path) -> Guess {
    let home = format!("CARGO_HOME={}/.cargo-home", crate::seeds::ALIAS);
    let mut inputs = vec!["Cargo.toml".to_string()];
    if root.join("Cargo.lock").is_file() {
        inputs.push("Cargo.lock".to_string());
    }
    Guess {
        command: format!("{home} cargo test --offline"),
        from: "Cargo.toml",
        setup: Some(crate::config::Setup {
            commands: vec![
                format!("{home} cargo fetch"),
                format!("{home} cargo test --no-run"),
            ],
            inputs,
            outputs: vec!["target".to_string(), ".cargo-home".to_string()],
            network: vec![
                "index.crates.io".to_string(),
                "static.crates.io".to_string(),
            ],
        }),
    }
}

/// A Python project's check and setup, from its `pyproject.toml`: a virtual environment
/// (`.venv`) holding pytest, the package itself (editable) with its test extra, the plugins
/// pytest's own `addopts` needs (`--cov`: pytest-cov), and a test requirements file when
/// there is one, installed from PyPI; the check runs the environment's pytest.
fn python(root: &Path) -> Guess {
    let read = |name: &str| {
        crate::files::read_untrusted(&root.join(name), 1 << 20)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let pyproject: toml::Table = read("pyproject.toml")
        .and_then(|text| toml::from_str(&text).ok())
        .unwrap_or_default();
    let at = |path: &[&str]| {
        let (first, rest) = path.split_first()?;
        rest.iter()
            .try_fold(pyproject.get(*first)?, |value, key| value.get(*key))
    };
    let extra = ["test", "tests", "testing", "dev"]
        .into_iter()
        .find(|name| at(&["project", "optional-dependencies", name]).is_some());
    let addopts = at(&["tool", "pytest", "ini_options", "addopts"])
        .map(|v| match v {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default();
    let mut packages = vec!["pytest".to_string()];
    if addopts.contains("--cov") {
        packages.push("pytest-cov".to_string());
    }
    packages.push(match extra {
        Some(extra) => format!("-e '.[{extra}]'"),
        None => "-e .".to_string(),
    });
    let mut inputs = vec!["pyproject.toml".to_string()];
    for file in [
        "requirements-test.txt",
        "requirements-dev.txt",
        "test-requirements.txt",
    ] {
        if root.join(file).is_file() {
            packages.push(format!("-r {file}"));
            inputs.push(file.to_string());
            break;
        }
    }
    for file in ["setup.py", "setup.cfg", "uv.lock", "requirements.txt"] {
        if root.join(file).is_file() {
            inputs.push(file.to_string());
        }
    }
    Guess {
        command: ".venv/bin/python -m pytest".to_string(),
        from: "pyproject.toml",
        setup: Some(crate::config::Setup {
            commands: vec![
                "python3 -m venv .venv".to_string(),
                format!(
                    ".venv/bin/pip install --disable-pip-version-check {}",
                    packages.join(" ")
                ),
            ],
            inputs,
            outputs: vec![".venv".to_string()],
            network: vec!["pypi.org".to_string(), "files.pythonhosted.org".to_string()],
        }),
    }
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

/// An installed harness's starting table, from its manifest (`example`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessExample {
    /// The plugin's name.
    pub name: String,
    /// Its one line.
    pub description: String,
    /// Its `[plugins.<name>]` table as the person would start it (TOML text).
    pub example: String,
}

/// What `stet init` writes.
pub struct Setup<'a> {
    /// The harness found.
    pub harness: &'a Found,
    /// The runtime found.
    pub runtime: &'a Found,
    /// The image sandboxes start from.
    pub image: &'a str,
    /// Why that image, when it is not the lane image as it is (one built for the check).
    pub image_note: Option<&'a str>,
    /// The check command, when one was guessed.
    pub check: Option<&'a Guess>,
    /// Every installed harness's starting table, written commented out.
    pub harnesses: &'a [HarnessExample],
}

/// `text` as one line of a comment: what plugins say of themselves (a description, a probe's
/// answer, a build command) is theirs, and a line break in it would end the comment and
/// write configuration — into a file stet records as trusted.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
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
                    "# Found by stet init: {} {} ({}).\nprefer = [\"{name}\"]\n",
                    one_line(name),
                    one_line(version),
                    one_line(why)
                ));
            }
            Found::None(why) => {
                let why = one_line(why);
                out.push_str(&format!(
                    "# stet init found no usable {kind}: {why}.\n# `stet plugins probe` says why; then name it here (`stet plugins list` has the names):\n# prefer = [\"NAME\"]\n"
                ));
            }
        }
    };
    plugin(&mut out, "harness", "harness", setup.harness);
    plugin(&mut out, "runtime", "runtime", setup.runtime);
    for harness in setup.harnesses {
        // Commented out: a table names programs and hosts for the agent, the person's word.
        out.push_str(&format!(
            "\n# The {} harness: {}. Uncomment and fill in to use it:\n",
            one_line(&harness.name),
            one_line(&harness.description)
        ));
        for line in harness.example.trim().lines() {
            let line = one_line(line);
            if line.starts_with('#') {
                out.push_str(&format!("#{line}\n"));
            } else {
                out.push_str(&format!("# {line}\n"));
            }
        }
    }
    out.push_str(
        "\n[sandbox]\n\
         # The image every sandbox starts from: it needs sh and git, and whatever the check\n\
         # runs. stet-lane:1 holds git only (scripts/build-image.sh); to use your own toolchain\n\
         # image, see \"Your own image\" in docs/configuration.md.\n",
    );
    if let Some(note) = setup.image_note {
        for line in note.lines() {
            out.push_str(&format!("# {line}\n"));
        }
    }
    out.push_str(&format!("image = \"{}\"\n", setup.image));
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
    if let Some(setup) = setup.check.and_then(|g| g.setup.as_ref()) {
        let list = |items: &[String]| {
            items
                .iter()
                .map(|i| format!("\"{}\"", i.replace('\\', "\\\\").replace('"', "\\\"")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "\n[lane]\n\
             # Run once per clone on the remote's base, in a sandbox with the image above and\n\
             # stet's proxy to setup_network alone; what it fills (setup_outputs) is every\n\
             # lane's start, each lane its own copy. It runs again when setup_inputs change.\n\
             # `stet seed` runs it now; a drive runs it before its first lane.\n\
             setup = [{}]\n\
             setup_inputs = [{}]\n\
             setup_outputs = [{}]\n\
             setup_network = [{}]\n",
            list(&setup.commands),
            list(&setup.inputs),
            list(&setup.outputs),
            list(&setup.network)
        ));
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
                Some((
                    "CARGO_HOME=/stet-lane/.cargo-home cargo test --offline",
                    "Cargo.toml",
                )),
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
                Some((".venv/bin/python -m pytest", "pyproject.toml")),
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
    fn a_python_projects_setup_installs_its_test_extra_and_what_pytests_own_options_need() {
        let dir = repo(&[
            (
                "pyproject.toml",
                "[project]\nname = \"x\"\n[project.optional-dependencies]\ntests = [\"hypothesis\"]\n\
                 [tool.pytest.ini_options]\naddopts = \"--cov=x --doctest-modules\"\n",
            ),
            ("requirements-dev.txt", "freezegun\n"),
            ("setup.cfg", ""),
        ]);
        let guess = guess_check(dir.path()).unwrap();
        assert_eq!(guess.command, ".venv/bin/python -m pytest");
        assert_eq!(guess.toolchain().packages, "python3 python3-venv");
        let setup = guess.setup.clone().unwrap();
        assert_eq!(
            setup.commands,
            [
                "python3 -m venv .venv",
                ".venv/bin/pip install --disable-pip-version-check pytest pytest-cov -e '.[tests]' -r requirements-dev.txt"
            ]
        );
        assert_eq!(
            setup.inputs,
            ["pyproject.toml", "requirements-dev.txt", "setup.cfg"]
        );
        assert_eq!(setup.outputs, [".venv"]);
        // The [lane] table init writes reads back as the same setup.
        let found = Found::None("none".into());
        let text = config_text(&Setup {
            harness: &found,
            runtime: &found,
            image: "stet-lane-python:1",
            image_note: None,
            check: Some(&guess),
            harnesses: &[],
        });
        let parsed = crate::config::parse(Path::new("stet.toml"), &text).unwrap();
        assert_eq!(parsed.lane_setup, Some(setup));
        assert_eq!(
            parsed.drive_check.as_deref(),
            Some(".venv/bin/python -m pytest")
        );
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
            setup: None,
        };
        let examples = [HarnessExample {
            name: "an-agent".into(),
            description: "any agent".into(),
            example: "# Say how.\n[plugins.an-agent]\nimplement = [\"./agent\"]\n".into(),
        }];
        let text = config_text(&Setup {
            harness: &harness,
            runtime: &runtime,
            image: "stet-lane-rust:1",
            image_note: Some("built from .stet/Containerfile"),
            check: Some(&check),
            harnesses: &examples,
        });
        assert!(
            text.contains("\n## Say how.\n# [plugins.an-agent]\n# implement = [\"./agent\"]\n"),
            "each harness's table is written commented out: {text}"
        );
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
        assert_eq!(parsed.sandbox_image.as_deref(), Some("stet-lane-rust:1"));
        assert!(parsed.plugins.is_empty(), "no harness table is live");
    }

    #[test]
    fn what_plugins_say_of_themselves_stays_inside_its_comment() {
        // A plugin's description, a probe's answer and an example line, each trying to end
        // its comment and write configuration into the file stet records as trusted.
        let harness = Found::None("gone\n[drive]\nland = \"sh -c evil\"".into());
        let runtime = Found::Chosen {
            name: "rt".into(),
            version: "1\r\n[network]\nallow = [\"evil:443\"]".into(),
            why: "x".into(),
        };
        let examples = [HarnessExample {
            name: "an-agent".into(),
            description: "nice\n[drive]\nland = \"sh -c evil\"".into(),
            example: "implement = [\"a\"]\r[drive]\n".into(),
        }];
        let text = config_text(&Setup {
            harness: &harness,
            runtime: &runtime,
            image: "stet-lane:1",
            image_note: None,
            check: None,
            harnesses: &examples,
        });
        let parsed = crate::config::parse(Path::new("stet.toml"), &text).unwrap();
        assert_eq!(parsed.drive_land, None, "{text}");
        assert!(parsed.plugins.is_empty(), "{text}");
        assert!(
            text.lines().filter(|l| l.starts_with("[drive]")).count() <= 1,
            "{text}"
        );
        assert!(!text.lines().any(|l| l.starts_with("[network]")), "{text}");
        assert!(!text.contains('\r'), "{text}");
        let file = containerfile(
            "stet-lane:1",
            &Guess {
                command: "make".into(),
                from: "Makefile",
                setup: None,
            },
            "build\nRUN evil",
        );
        assert!(!file.contains("\nRUN evil"), "{file}");
    }

    #[test]
    fn a_check_that_needs_a_toolchain_gets_an_image_made_for_it_from_the_lane_image() {
        let guess = Guess {
            command: "cargo test".into(),
            from: "Cargo.toml",
            setup: None,
        };
        let tag = toolchain_tag(&guess.toolchain());
        assert_eq!(tag, "stet-lane-rust:1");
        let build = build_command("builder build -t {tag} -f {file} {dir}", &tag);
        assert_eq!(
            build,
            "builder build -t stet-lane-rust:1 -f .stet/Containerfile .stet"
        );
        let text = containerfile("stet-lane:1", &guess, &build);
        assert!(text.contains("\nFROM stet-lane:1\n"), "{text}");
        assert!(
            text.contains("--no-install-recommends cargo-web gcc libc6-dev \\\n"),
            "{text}"
        );
        assert!(text.contains(&format!("#   {build}\n")), "{text}");
        assert!(build_command("", &tag).contains("tagged stet-lane-rust:1"));
    }
}
