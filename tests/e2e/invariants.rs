//! Invariants written in ARCHITECTURE.md, checked.

use std::path::Path;
use std::process::Command;

use stet_e2e::repo_root;

fn normal_dependencies(package: &str) -> String {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--edges",
            "normal",
            "--prefix",
            "none",
            "--package",
            package,
        ])
        .current_dir(repo_root())
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn crate_names(tree: &str) -> Vec<&str> {
    tree.lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[test]
fn the_host_does_not_depend_on_any_backend_library() {
    let tree = normal_dependencies("stet");
    let names = crate_names(&tree);
    for backend in [
        "bollard",
        "stet-plugin-docker",
        "stet-plugin-apple-container",
        "stet-plugin-claude",
        "stet-plugin-command",
    ] {
        assert!(
            !names.contains(&backend),
            "the host depends on {backend}:\n{tree}"
        );
    }
}

#[test]
fn the_plugin_api_has_no_async_runtime() {
    let tree = normal_dependencies("stet-plugin-api");
    let names = crate_names(&tree);
    for forbidden in ["tokio", "futures", "async-std"] {
        assert!(
            !names.contains(&forbidden),
            "stet-plugin-api depends on {forbidden}:\n{tree}"
        );
    }
}

#[test]
fn only_the_docker_plugin_depends_on_bollard() {
    for package in [
        "stet-plugin-apple-container",
        "stet-plugin-claude",
        "stet-plugin-command",
        "stet-plugin-support",
    ] {
        let tree = normal_dependencies(package);
        assert!(
            !crate_names(&tree).contains(&"bollard"),
            "{package} depends on bollard"
        );
    }
}

/// The host's code (comments and tests aside) never names a backend: backends are
/// plugins, selected by what their own probes report.
#[test]
fn host_code_names_no_backend() {
    let mut offenders = Vec::new();
    scan(&repo_root().join("host/src"), &mut offenders);
    assert!(
        offenders.is_empty(),
        "host code names a backend:\n{}",
        offenders.join("\n")
    );
}

fn scan(dir: &Path, offenders: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            scan(&path, offenders);
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            let code = line.split("//").next().unwrap().to_lowercase();
            if ["docker", "bollard", "apple", "claude", "podman", "colima"]
                .iter()
                .any(|word| code.contains(word))
            {
                offenders.push(format!("{}:{}: {line}", path.display(), number + 1));
            }
        }
    }
}

#[test]
fn the_command_reference_is_current() {
    let path = repo_root().join("docs/cli.md");
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == xtask::cli_reference(),
        "docs/cli.md is stale: run `cargo xtask docs` and commit the result"
    );
}
