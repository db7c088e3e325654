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
    // The benches too, but for the anchor commands they time stet against (the engine's
    // own CLI), each marked `// anchor:` where it is named.
    scan(&repo_root().join("host/benches"), &mut offenders);
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
        // Only the items `#[cfg(test)]` gates are skipped (a test module, a test helper):
        // the code after them is read too.
        let mut gated = false;
        let mut depth = 0i64;
        let mut opened = false;
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                (gated, depth, opened) = (true, 0, false);
                continue;
            }
            if gated {
                let code = line.split("//").next().unwrap();
                depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
                opened |= code.contains('{');
                if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                    gated = false;
                }
                continue;
            }
            if line.contains("// anchor:") && path.starts_with(repo_root().join("host/benches")) {
                continue;
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

/// Each plugin links the SDK and its own dependencies, never the host nor another plugin
/// (stet's own plugins may share the support crate, which is not the SDK).
#[test]
fn plugins_link_only_the_sdk_and_their_own_dependencies() {
    let plugins = xtask::plugin_crates(&repo_root().join("plugins"));
    assert!(!plugins.is_empty());
    let package_of = |dir: &Path| {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|v| v.strip_suffix('"'))
            .unwrap()
            .to_string()
    };
    let packages: Vec<String> = plugins.iter().map(|p| package_of(&p.dir)).collect();
    for package in &packages {
        let tree = normal_dependencies(package);
        let names = crate_names(&tree);
        assert!(
            names.contains(&"stet-plugin-api"),
            "{package} does not use the SDK"
        );
        assert!(
            !names.contains(&"stet"),
            "{package} links the host:\n{tree}"
        );
        for other in packages.iter().filter(|p| *p != package) {
            assert!(
                !names.contains(&other.as_str()),
                "{package} links another plugin, {other}:\n{tree}"
            );
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

/// The `crate::<module>` names a host module (a file, or a directory of files) refers to.
fn host_module_uses(module: &str) -> std::collections::BTreeSet<String> {
    let src = repo_root().join("host/src");
    let mut files = Vec::new();
    let dir = src.join(module);
    if dir.is_dir() {
        let mut pending = vec![dir];
        while let Some(d) = pending.pop() {
            for entry in std::fs::read_dir(&d).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.push(path);
                }
            }
        }
    } else {
        files.push(src.join(format!("{module}.rs")));
    }
    let mut uses = std::collections::BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains("use crate::{"),
            "{}: name modules one by one",
            file.display()
        );
        for (at, _) in text.match_indices("crate::") {
            let name: String = text[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && name != module {
                uses.insert(name);
            }
        }
    }
    uses
}

#[test]
fn the_host_concepts_import_each_other_without_a_circle() {
    // Data flows one way: cli → drive → harness → sandbox → settings → plugins.
    let modules = [
        "cli", "drive", "harness", "sandbox", "settings", "plugins", "walls",
    ];
    let edges: Vec<(&str, Vec<String>)> = modules
        .iter()
        .map(|m| {
            let uses = host_module_uses(m)
                .into_iter()
                .filter(|u| modules.contains(&u.as_str()))
                .collect();
            (*m, uses)
        })
        .collect();
    // Depth-first search for a cycle.
    fn visit<'a>(
        node: &'a str,
        edges: &'a [(&'a str, Vec<String>)],
        path: &mut Vec<&'a str>,
        done: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| *p == node) {
            let mut cycle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(&node) {
            return None;
        }
        path.push(node);
        let next = edges.iter().find(|(m, _)| *m == node).map(|(_, u)| u);
        for n in next.into_iter().flatten() {
            if let Some(cycle) = visit(n.as_str(), edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.push(node);
        None
    }
    let mut done = Vec::new();
    for (m, _) in &edges {
        if let Some(cycle) = visit(m, &edges, &mut Vec::new(), &mut done) {
            panic!("an import circle: {}", cycle.join(" → "));
        }
    }
    assert!(
        edges.iter().any(|(_, u)| !u.is_empty()),
        "no imports found at all"
    );
}

/// How many consecutive lines make a copy: non-blank lines, compared with their
/// whitespace collapsed.
const COPY_LINES: usize = 20;

/// Copies the duplicate-code scan accepts, each with why it is kept: (one file, the other,
/// the reason), the files in path order.
const ALLOWED_COPIES: &[(&str, &str, &str)] = &[
    (
        "plugin-api/src/abi/v1.rs",
        "plugin-api/src/abi/v1_1.rs",
        FROZEN_ABI,
    ),
    (
        "plugin-api/src/abi/v1.rs",
        "plugin-api/src/abi/v1_2.rs",
        FROZEN_ABI,
    ),
    (
        "plugin-api/src/abi/v1_1.rs",
        "plugin-api/src/abi/v1_2.rs",
        FROZEN_ABI,
    ),
];

/// Why the binary interface's versions repeat each other's trait declarations.
const FROZEN_ABI: &str = "a frozen interface module is the layout plugins of that version \
     export, spelt out where it cannot change (abi_stable compares the traits' methods, \
     names included); `v1` repeats 1.2's prefix by design and only appends. Generating \
     them from one text would make a change to `v1` reach the frozen ones";

/// The production Rust code: every `.rs` file under the source directories of the host,
/// the plugins, the SDK, the proxy, the support crates, the examples and xtask.
fn production_sources() -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = repo_root();
    let mut dirs = vec![
        root.join("host/src"),
        root.join("plugin-api/src"),
        root.join("proxy/src"),
        root.join("xtask/src"),
    ];
    for parent in ["plugins", "support", "examples"] {
        for entry in std::fs::read_dir(root.join(parent)).unwrap().flatten() {
            dirs.push(entry.path().join("src"));
        }
    }
    let mut files = Vec::new();
    for dir in &dirs {
        walk(dir, &mut files);
    }
    files.sort();
    files
}

/// A file's lines that count for the copy scan, with their line numbers: not blank, not
/// in an item `#[cfg(test)]` gates, whitespace collapsed.
fn countable_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let (mut gated, mut depth, mut opened) = (false, 0i64, false);
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            (gated, depth, opened) = (true, 0, false);
            continue;
        }
        if gated {
            let code = line.split("//").next().unwrap();
            depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            opened |= code.contains('{');
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                gated = false;
            }
            continue;
        }
        let normal = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if !normal.is_empty() {
            lines.push((number + 1, normal));
        }
    }
    lines
}

/// Every block of `window` or more consecutive countable lines that appears twice, within
/// one file or across files, as "a:from-to and b:from-to (n lines)". Windows are hashed,
/// equal hashes compared line by line, and a run of matching windows reported once.
fn repeated_blocks(files: &[(String, Vec<(usize, String)>)], window: usize) -> Vec<String> {
    use std::collections::{HashMap, HashSet};
    use std::hash::{Hash, Hasher};
    let mut by_hash: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
    for (f, (_, lines)) in files.iter().enumerate() {
        for start in 0..lines.len().saturating_sub(window - 1) {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            for (_, line) in &lines[start..start + window] {
                line.hash(&mut hasher);
            }
            by_hash.entry(hasher.finish()).or_default().push((f, start));
        }
    }
    let same = |(f, i): (usize, usize), (g, j): (usize, usize)| {
        let (a, b) = (&files[f].1, &files[g].1);
        (0..window).all(|k| a[i + k].1 == b[j + k].1)
    };
    // Each matching pair of windows, the earlier place first.
    let mut pairs: HashSet<((usize, usize), (usize, usize))> = HashSet::new();
    for places in by_hash.values().filter(|p| p.len() > 1) {
        for (n, &a) in places.iter().enumerate() {
            for &b in &places[n + 1..] {
                // A block overlapping itself is a repeated pattern, not a copy.
                if a.0 == b.0 && a.1.abs_diff(b.1) < window {
                    continue;
                }
                if same(a, b) {
                    pairs.insert((a.min(b), a.max(b)));
                }
            }
        }
    }
    let mut found: Vec<String> = pairs
        .iter()
        .filter(|((f, i), (g, j))| {
            *i == 0 || *j == 0 || !pairs.contains(&((*f, i - 1), (*g, j - 1)))
        })
        .map(|&((f, i), (g, j))| {
            let mut run = 0;
            while pairs.contains(&((f, i + run + 1), (g, j + run + 1))) {
                run += 1;
            }
            let place = |file: usize, at: usize| {
                let lines = &files[file].1;
                format!(
                    "{}:{}-{}",
                    files[file].0,
                    lines[at].0,
                    lines[at + run + window - 1].0
                )
            };
            format!(
                "{} and {} ({} lines)",
                place(f, i),
                place(g, j),
                run + window
            )
        })
        .collect();
    found.sort();
    found
}

#[test]
fn the_duplicate_scan_finds_a_copied_block_and_names_both_places() {
    let block: String = (0..COPY_LINES)
        .map(|n| format!("    let value_{n} = compute({n});\n"))
        .collect();
    let one = format!("fn a() {{\n{block}}}\n");
    let two = format!(
        "// elsewhere\n\nfn b() {{\n{}\n}}\n",
        block.replace("    ", "\t")
    );
    let shorter = format!("fn c() {{\n{}}}\n", &block[..block.len() / 2]);
    let gated = format!("#[cfg(test)]\nmod tests {{\n{block}}}\n");
    let files = vec![
        ("one.rs".to_string(), countable_lines(&one)),
        ("two.rs".to_string(), countable_lines(&two)),
        ("three.rs".to_string(), countable_lines(&shorter)),
        ("four.rs".to_string(), countable_lines(&gated)),
    ];
    let found = repeated_blocks(&files, COPY_LINES);
    assert_eq!(
        found,
        ["one.rs:2-22 and two.rs:4-25 (21 lines)".to_string()],
        "{found:#?}"
    );
}

/// No block of `COPY_LINES` lines is repeated in production code: shared code lives in
/// one place (a support crate, a helper), so a fix is made once.
#[test]
fn production_code_repeats_no_block_of_twenty_lines() {
    let root = repo_root();
    let files: Vec<(String, Vec<(usize, String)>)> = production_sources()
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (name, countable_lines(&text))
        })
        .collect();
    assert!(files.len() > 50, "only {} source files found", files.len());
    let copies: Vec<String> = repeated_blocks(&files, COPY_LINES)
        .into_iter()
        .filter(|copy| {
            !ALLOWED_COPIES.iter().any(|(a, b, _)| {
                copy.starts_with(&format!("{a}:")) && copy.contains(&format!(" and {b}:"))
            })
        })
        .collect();
    assert!(
        copies.is_empty(),
        "{} blocks of {COPY_LINES}+ lines are repeated in production code (make them shared \
         code, or list them in ALLOWED_COPIES with the reason):\n{}",
        copies.len(),
        copies.join("\n")
    );
}
