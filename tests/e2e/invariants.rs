//! Invariants written in ARCHITECTURE.md, checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
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

/// The host's packages — the `stet` binary (`host/`) and the library crates beside it
/// (`host/*/`) — each with its directory, read from the workspace, never listed by hand.
fn host_packages() -> Vec<(String, PathBuf)> {
    let host = repo_root().join("host");
    let mut dirs = vec![host.clone()];
    for entry in std::fs::read_dir(&host).unwrap().flatten() {
        if entry.path().join("Cargo.toml").is_file() {
            dirs.push(entry.path());
        }
    }
    let mut packages: Vec<(String, PathBuf)> = dirs
        .into_iter()
        .map(|dir| (package_of(&dir), dir))
        .collect();
    packages.sort();
    packages
}

/// The name of the package at `dir`.
fn package_of(dir: &Path) -> String {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    manifest
        .lines()
        .find_map(|l| l.strip_prefix("name = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap()
        .to_string()
}

/// The source directories of the host's library crates (`host/*/src`).
fn host_library_sources() -> Vec<PathBuf> {
    host_packages()
        .into_iter()
        .map(|(_, dir)| dir.join("src"))
        .filter(|src| src.join("lib.rs").is_file())
        .collect()
}

fn crate_names(tree: &str) -> Vec<&str> {
    tree.lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

/// The host's crates in the order ARCHITECTURE.md draws them (`stet ─▶ stet-cli ─▶ …`),
/// the binary first and the floor last.
fn drawn_crate_order() -> Vec<String> {
    let map = std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).unwrap();
    let line = map
        .lines()
        .find(|l| l.trim_start().starts_with("stet ─▶ stet-cli"))
        .expect("ARCHITECTURE.md draws the host's crates as `stet ─▶ stet-cli ─▶ …`");
    line.split("─▶").map(|c| c.trim().to_string()).collect()
}

/// Each package's direct dependencies (every kind), from `cargo metadata`.
fn direct_dependencies() -> BTreeMap<String, Vec<(String, Option<String>)>> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo_root())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    let name = d["name"].as_str().unwrap().to_string();
                    (name, d["kind"].as_str().map(str::to_string))
                })
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The host is a few crates along its floors, and the compiler keeps them there: each
/// depends only on crates drawn below it in ARCHITECTURE.md (its tests too), the drawing
/// names every host package once, and only the board's crate has a web stack.
#[test]
fn the_host_crates_depend_only_on_the_floors_below_them() {
    let order = drawn_crate_order();
    let mut drawn: Vec<String> = order.clone();
    drawn.sort();
    let mut packages: Vec<String> = host_packages().into_iter().map(|(n, _)| n).collect();
    packages.sort();
    assert_eq!(
        drawn, packages,
        "ARCHITECTURE.md's crate order names the host's packages"
    );
    let deps = direct_dependencies();
    let mut upward = Vec::new();
    for (at, name) in order.iter().enumerate() {
        for (dep, kind) in &deps[name] {
            let Some(dep_at) = order.iter().position(|c| c == dep) else {
                continue;
            };
            if dep_at <= at {
                upward.push(format!(
                    "{name} → {dep} ({})",
                    kind.as_deref().unwrap_or("normal")
                ));
            }
        }
        if name != "stet-board" {
            for web in [
                "axum",
                "hyper",
                "hyper-util",
                "askama",
                "tokio",
                "futures-util",
            ] {
                assert!(
                    !deps[name]
                        .iter()
                        .any(|(d, kind)| d == web && kind.is_none()),
                    "{name} depends on {web}: only stet-board has a web stack"
                );
            }
        }
    }
    assert!(
        upward.is_empty(),
        "upward edges between the host's crates:\n{}",
        upward.join("\n")
    );
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
        "stet-plugin-codex",
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
        "stet-plugin-codex",
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
    // Every plugin of the repository is among the words, gVisor and bubblewrap included.
    let words = backend_words();
    for name in [
        "docker",
        "gvisor",
        "bubblewrap",
        "claude",
        "codex",
        "apple-container",
    ] {
        assert!(
            words.iter().any(|w| w == name),
            "{name} missing from {words:?}"
        );
    }
    let mut offenders = Vec::new();
    scan(&repo_root().join("host/src"), &words, &mut offenders);
    for src in host_library_sources() {
        scan(&src, &words, &mut offenders);
    }
    // The benches too, but for the anchor commands they time stet against (the engine's
    // own CLI), each marked `// anchor:` where it is named.
    scan(&repo_root().join("host/benches"), &words, &mut offenders);
    assert!(
        offenders.is_empty(),
        "host code names a backend:\n{}",
        offenders.join("\n")
    );
}

/// Plugins whose names are words the host uses for its own concepts, not a backend: the
/// command harness runs any command-line agent; the example runtime is the template.
const GENERIC_PLUGINS: &[&str] = &["command", "example"];

/// Backends and the libraries that reach them that no plugin is named after.
const OTHER_BACKEND_WORDS: &[&str] = &["bollard", "apple", "runsc", "podman", "colima"];

/// The words that name a backend: every plugin's name in the repository (its own, the
/// examples', read from their manifests) but the generic ones, and the other words.
fn backend_words() -> Vec<String> {
    let root = repo_root();
    let mut words: Vec<String> = ["plugins", "examples"]
        .iter()
        .flat_map(|dir| xtask::plugin_crates(&root.join(dir)))
        .map(|p| p.name.to_lowercase())
        .filter(|name| !GENERIC_PLUGINS.contains(&name.as_str()))
        .chain(OTHER_BACKEND_WORDS.iter().map(|w| w.to_string()))
        .collect();
    words.sort();
    words.dedup();
    words
}

fn scan(dir: &Path, words: &[String], offenders: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            scan(&path, words, offenders);
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
            if words.iter().any(|word| code.contains(word.as_str())) {
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
    let packages: Vec<String> = plugins.iter().map(|p| package_of(&p.dir)).collect();
    let host: Vec<String> = host_packages().into_iter().map(|(name, _)| name).collect();
    for package in &packages {
        let tree = normal_dependencies(package);
        let names = crate_names(&tree);
        assert!(
            names.contains(&"stet-plugin-api"),
            "{package} does not use the SDK"
        );
        for host in &host {
            assert!(
                !names.contains(&host.as_str()),
                "{package} links the host's {host}:\n{tree}"
            );
        }
        for other in packages.iter().filter(|p| *p != package) {
            assert!(
                !names.contains(&other.as_str()),
                "{package} links another plugin, {other}:\n{tree}"
            );
        }
    }
}

/// Import edges that would close a circle and are allowed for now, each with why. An entry
/// whose edge no longer exists fails the test, so the list only shrinks.
const TEMPORARY_EDGES: &[(&str, &str, &str)] = &[];

/// The host's modules import each other without a circle: data flows one way (claim →
/// lane → sandbox → call → outcome → receipt → land), configuration and plumbing below.
///
/// The modules are read from the source tree: every file module reached from
/// each host crate's `lib.rs` through its `mod` declarations, named by path (`drive::lane`), the
/// items `#[cfg(test)]` gates left out (test modules, test helpers, the imports only tests
/// use). An inline module (`mod bounded { … }`) belongs to its file. An import is any
/// `crate::…`, `super::…` or `self::…` path in the code, and every path of a `use`
/// declaration (groups such as `use crate::{a, b::c}` included); it points at the module
/// that defines the item, following the `use` declarations of the modules on the way (so a
/// `super::clock` that a parent re-exports from a sibling points at the sibling).
///
/// The rule, at every level of the module tree: the children of one module (the crate's
/// top-level modules; `drive`'s, `walls`'s, `plugins`'s, …), each counted with everything
/// below it, import each other without a circle. A parent's own code stands above its
/// children: it declares them and may call and re-export them, and a child may use its
/// parent's items (the parent is its namespace); such edges are not circles. So
/// `walls::runtime` may use `super::Wall` while `walls` uses `runtime`, but `walls::runtime`
/// importing `harness` makes `walls → harness` at the top level, and `harness` importing
/// `walls` too would be a circle, as would `drive::lane → drive::drain → drive::lane`.
#[test]
fn the_host_concepts_import_each_other_without_a_circle() {
    // Each library crate of the host on its own: between crates, cargo forbids a circle.
    let graphs: Vec<ModuleGraph> = host_library_sources()
        .iter()
        .map(|src| ModuleGraph::read(src))
        .collect();
    let modules: Vec<String> = graphs
        .iter()
        .flat_map(|g| g.modules.iter().map(|m| m.join("::")))
        .collect();
    for expected in [
        "cli",
        "drive",
        "drive::lane",
        "drive::drain",
        "walls::runtime",
        "git",
    ] {
        assert!(
            modules.iter().any(|m| m == expected),
            "module {expected} not found: {modules:?}"
        );
    }
    assert!(
        !modules.iter().any(|m| m == "drive::scenarios"),
        "drive::scenarios is a test module, and counted"
    );
    let mut temporary: BTreeSet<(Vec<String>, Vec<String>)> = TEMPORARY_EDGES
        .iter()
        .map(|(from, to, _)| (path_of(from), path_of(to)))
        .collect();
    let mut circles = Vec::new();
    let mut found_imports = false;
    for graph in &graphs {
        let mut edges = graph.edges.clone();
        edges.retain(|key, _| !temporary.remove(key));
        found_imports |= edges.keys().any(|(from, _)| from.len() == 1);
        circles.extend(
            graph
                .modules
                .iter()
                .filter_map(|parent| circle_among_children(parent, &graph.modules, &edges)),
        );
    }
    assert!(
        temporary.is_empty(),
        "no longer imported, remove from TEMPORARY_EDGES: {temporary:?}"
    );
    assert!(found_imports, "no imports found at all");
    assert!(
        circles.is_empty(),
        "the host's modules import each other in a circle:\n{}",
        circles.join("\n")
    );
}

fn path_of(name: &str) -> Vec<String> {
    name.split("::").map(str::to_string).collect()
}

fn name_of(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// `(module, name)` → the `use` path that brings `name` into `module` (inline modules
/// included), and the module it is written in.
type Aliases = BTreeMap<(Vec<String>, String), (Vec<String>, Vec<String>)>;

/// One place a module imports another, for the failure message.
type Evidence = String;

/// The host's file modules and the imports between them.
struct ModuleGraph {
    /// Every file module, by path (`[]` is the crate root, lib.rs).
    modules: Vec<Vec<String>>,
    /// `(from, to)` between file modules, with the first place it was seen.
    edges: BTreeMap<(Vec<String>, Vec<String>), Evidence>,
}

/// A `use` path or a `crate::`/`super::`/`self::` path, as written, with where it was.
struct PathRef {
    /// The module (inline modules included) the path is written in.
    context: Vec<String>,
    segments: Vec<String>,
    /// Where, for the failure message: `file:line`.
    at: String,
}

impl ModuleGraph {
    fn read(src: &Path) -> ModuleGraph {
        // Every file module, from lib.rs down its non-test `mod name;` declarations.
        let mut files: Vec<(Vec<String>, PathBuf)> = Vec::new();
        let mut test_files = Vec::new();
        let mut pending = vec![(Vec::<String>::new(), src.join("lib.rs"))];
        let mut all_modules = BTreeSet::new();
        let mut refs: Vec<PathRef> = Vec::new();
        let mut aliases = BTreeMap::new();
        while let Some((module, file)) = pending.pop() {
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let code = without_literals(&text);
            let all = tokens(&code);
            let kept = tokens(&without_test_items(&code));
            let dir = match file.file_name().and_then(|n| n.to_str()) {
                Some("lib.rs") | Some("mod.rs") => file.parent().unwrap().to_path_buf(),
                _ => file.with_extension(""),
            };
            let child_file = |name: &str| {
                let flat = dir.join(format!("{name}.rs"));
                if flat.is_file() {
                    flat
                } else {
                    dir.join(name).join("mod.rs")
                }
            };
            let declared = module_declarations(&kept);
            for name in module_declarations(&all) {
                if !declared.contains(&name) {
                    test_files.push(child_file(&name));
                }
            }
            for name in declared {
                let mut child = module.clone();
                child.push(name.clone());
                pending.push((child, child_file(&name)));
            }
            let shown = file
                .strip_prefix(src)
                .unwrap_or(&file)
                .display()
                .to_string();
            read_paths(
                &module,
                &shown,
                &code,
                &kept,
                &mut all_modules,
                &mut refs,
                &mut aliases,
            );
            all_modules.insert(module.clone());
            files.push((module, file));
        }
        // A file no declaration reaches would go unchecked.
        let mut on_disk = Vec::new();
        let mut dirs = vec![src.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    on_disk.push(path);
                }
            }
        }
        for path in on_disk {
            let test_only = test_files
                .iter()
                .any(|t| path.starts_with(t.with_extension("")))
                || test_files.contains(&path);
            assert!(
                path == src.join("main.rs")
                    || test_only
                    || files.iter().any(|(_, file)| *file == path),
                "{}: no module declaration reaches this file",
                path.display()
            );
        }
        let modules: Vec<Vec<String>> = {
            let mut m: Vec<Vec<String>> = files.into_iter().map(|(m, _)| m).collect();
            m.sort();
            m
        };
        let resolver = Resolver {
            modules: &all_modules,
            aliases: &aliases,
        };
        let file_module = |path: &[String]| -> Vec<String> {
            let mut path = path.to_vec();
            while !modules.contains(&path) {
                path.pop();
            }
            path
        };
        let mut edges = BTreeMap::new();
        for r in refs {
            let Some(target) = resolver.resolve(&r.context, &r.segments, 0) else {
                continue;
            };
            let (from, to) = (file_module(&r.context), file_module(&target.module));
            if from != to {
                edges
                    .entry((from, to))
                    .or_insert_with(|| format!("{} `{}`", r.at, r.segments.join("::")));
            }
        }
        ModuleGraph { modules, edges }
    }
}

/// What a path names: a module, or an item defined in one.
struct Resolved {
    module: Vec<String>,
    is_module: bool,
}

struct Resolver<'a> {
    /// File and inline modules.
    modules: &'a BTreeSet<Vec<String>>,
    aliases: &'a Aliases,
}

impl Resolver<'_> {
    /// The module a path written in `context` points into; `None` for a path outside the
    /// crate (`std::…`, another crate) or a local name.
    fn resolve(&self, context: &[String], segments: &[String], depth: usize) -> Option<Resolved> {
        if depth > 16 {
            return None;
        }
        let (mut at, rest) = match segments.first()?.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "super" => {
                let up = segments.iter().take_while(|s| *s == "super").count();
                (
                    context[..context.len().checked_sub(up)?].to_vec(),
                    &segments[up..],
                )
            }
            "self" => (context.to_vec(), &segments[1..]),
            _ => (context.to_vec(), segments),
        };
        for (i, segment) in rest.iter().enumerate() {
            let mut next = at.clone();
            next.push(segment.clone());
            if self.modules.contains(&next) {
                at = next;
                continue;
            }
            let alias = self.aliases.get(&(at.clone(), segment.clone()));
            let relative_start =
                i == 0 && !["crate", "super", "self"].contains(&segments[0].as_str());
            match alias.and_then(|(context, path)| self.resolve(context, path, depth + 1)) {
                Some(target) if target.is_module => at = target.module,
                Some(target) => {
                    return Some(Resolved {
                        module: target.module,
                        is_module: false,
                    })
                }
                // A name from outside the crate, or a local one, written as a relative path.
                None if relative_start => return None,
                // An item of `at`, or a name `at` imports from outside the crate.
                None => {
                    return Some(Resolved {
                        module: at,
                        is_module: false,
                    })
                }
            }
        }
        Some(Resolved {
            module: at,
            is_module: true,
        })
    }
}

/// Reads a file's paths: the `use` declarations (which also become aliases) and every
/// `crate::`, `super::` and `self::` path, each with the module it is written in, inline
/// modules (whose names go into `modules`) included.
fn read_paths(
    module: &[String],
    file: &str,
    code: &str,
    tokens: &[(usize, String)],
    modules: &mut BTreeSet<Vec<String>>,
    refs: &mut Vec<PathRef>,
    aliases: &mut Aliases,
) {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut context = module.to_vec();
    // The brace depth at which each open inline module ends.
    let mut inline_ends: Vec<usize> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    let text = |i: usize| tokens.get(i).map_or("", |(_, t)| t.as_str());
    while i < tokens.len() {
        match text(i) {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline_ends.last() == Some(&depth) {
                    inline_ends.pop();
                    context.pop();
                }
            }
            "mod" if text(i + 2) == "{" => {
                context.push(text(i + 1).to_string());
                modules.insert(context.clone());
                inline_ends.push(depth);
            }
            "use" => {
                let end = (i..tokens.len())
                    .find(|&j| text(j) == ";")
                    .unwrap_or(tokens.len());
                let words: Vec<&str> = tokens[i + 1..end].iter().map(|(_, t)| t.as_str()).collect();
                let mut paths = Vec::new();
                use_tree(&words, &mut 0, Vec::new(), &mut paths);
                for (mut segments, rename) in paths {
                    if segments.last().is_some_and(|s| s == "self") {
                        segments.pop();
                    }
                    let name = rename.or_else(|| segments.last().cloned());
                    if let Some(name) = name.filter(|n| n != "*" && n != "_") {
                        aliases
                            .insert((context.clone(), name), (context.clone(), segments.clone()));
                    }
                    refs.push(PathRef {
                        context: context.clone(),
                        segments,
                        at: format!("{file}:{}", line_of(tokens[i].0)),
                    });
                }
                i = end;
            }
            "crate" | "super" | "self"
                if text(i + 1) == "::" && !matches!(text(i.wrapping_sub(1)), "::" | "$") =>
            {
                let mut segments = vec![text(i).to_string()];
                while text(i + 1) == "::" && is_ident(text(i + 2)) {
                    segments.push(text(i + 2).to_string());
                    i += 2;
                }
                refs.push(PathRef {
                    context: context.clone(),
                    segments,
                    at: format!("{file}:{}", line_of(tokens[i].0)),
                });
            }
            _ => {}
        }
        i += 1;
    }
}

/// Parses one use tree (`a::b`, `a::{b, c::d as e}`, `a::*`) into its paths, each with
/// its rename.
fn use_tree(
    words: &[&str],
    i: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix;
    while let Some(word) = words.get(*i) {
        match *word {
            "::" => *i += 1,
            "{" => {
                *i += 1;
                while words.get(*i).is_some_and(|w| *w != "}") {
                    use_tree(words, i, path.clone(), out);
                    if words.get(*i) == Some(&",") {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            "*" => {
                *i += 1;
                out.push((path, Some("*".to_string())));
                return;
            }
            word if is_ident(word) => {
                path.push(word.to_string());
                *i += 1;
                if words.get(*i) == Some(&"as") {
                    out.push((path, words.get(*i + 1).map(|w| w.to_string())));
                    *i += 2;
                    return;
                }
                if words.get(*i) != Some(&"::") {
                    out.push((path, None));
                    return;
                }
            }
            _ => {
                *i += 1;
                return;
            }
        }
    }
}

/// The `mod name;` declarations (not inline modules) in a file's tokens.
fn module_declarations(tokens: &[(usize, String)]) -> Vec<String> {
    tokens
        .windows(3)
        .filter(|w| w[0].1 == "mod" && is_ident(&w[1].1) && w[2].1 == ";")
        .map(|w| w[1].1.clone())
        .collect()
}

fn is_ident(word: &str) -> bool {
    word.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Identifiers, `::`, and single punctuation characters, each with its byte offset.
fn tokens(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut word = c.to_string();
            while let Some(&(_, c)) = chars
                .peek()
                .filter(|(_, c)| c.is_alphanumeric() || *c == '_')
            {
                word.push(c);
                chars.next();
            }
            out.push((at, word));
        } else if c == ':' && chars.peek().is_some_and(|(_, c)| *c == ':') {
            chars.next();
            out.push((at, "::".to_string()));
        } else if !c.is_whitespace() {
            out.push((at, c.to_string()));
        }
    }
    out
}

/// The code with comments, string and character literals blanked out (line breaks kept,
/// so lines still count).
fn without_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let after_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let start = i;
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut nesting = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    nesting += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    nesting -= 1;
                    i += 2;
                    if nesting == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if !after_ident
            && (c == 'r' || (c == 'b' && next == Some('r')))
            && raw_string_hashes(&chars, i + if c == 'b' { 2 } else { 1 }).is_some()
        {
            let open = i + if c == 'b' { 2 } else { 1 };
            let hashes = raw_string_hashes(&chars, open).unwrap();
            i = open + hashes + 1;
            while i < chars.len()
                && !(chars[i] == '"' && (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')))
            {
                i += 1;
            }
            i += hashes + 1;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' && next == Some('\\') {
            i += 3;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            out.push(c);
            i += 1;
            continue;
        }
        let end = i.min(chars.len());
        out.extend(chars[start..end].iter().map(|&c| blank(c)));
        i = end;
    }
    out
}

/// How many `#` open a raw string whose `r` (or `br`) ends just before `from`; `None` if
/// no raw string starts there.
fn raw_string_hashes(chars: &[char], from: usize) -> Option<usize> {
    let hashes = chars[from..].iter().take_while(|c| **c == '#').count();
    (chars.get(from + hashes) == Some(&'"')).then_some(hashes)
}

/// The code with the items `#[cfg(test)]` gates (and the attribute) blanked out; a file
/// whose inner attribute is `#![cfg(test)]` is blanked whole.
fn without_test_items(code: &str) -> String {
    if code.contains("#![cfg(test)]") {
        return code
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
    }
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(found) = out[from..].find("#[cfg(test)]") {
        let start = from + found;
        let mut depth = 0i64;
        let mut end = out.len();
        for (at, c) in out[start + "#[cfg(test)]".len()..].char_indices() {
            let at = start + "#[cfg(test)]".len() + at;
            match c {
                '{' | '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = at + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = at + 1;
                    break;
                }
                _ => {}
            }
        }
        let blanked: String = out[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..end, &blanked);
        from = end;
    }
    out
}

/// At one level of the module tree (the children of `parent`, each with everything below
/// it), a circle of imports, named with one import for each arrow.
fn circle_among_children(
    parent: &[String],
    modules: &[Vec<String>],
    edges: &BTreeMap<(Vec<String>, Vec<String>), Evidence>,
) -> Option<String> {
    let child_of = |m: &Vec<String>| -> Option<Vec<String>> {
        (m.len() > parent.len() && m.starts_with(parent)).then(|| m[..=parent.len()].to_vec())
    };
    let children: Vec<Vec<String>> = modules
        .iter()
        .filter(|m| m.len() == parent.len() + 1 && m.starts_with(parent))
        .cloned()
        .collect();
    let mut arrows: BTreeMap<Vec<String>, Vec<(Vec<String>, Evidence)>> = BTreeMap::new();
    for ((from, to), evidence) in edges {
        if let (Some(a), Some(b)) = (child_of(from), child_of(to)) {
            if a != b {
                let shown = format!("{} → {}: {evidence}", name_of(from), name_of(to));
                let out = arrows.entry(a).or_default();
                if !out.iter().any(|(t, _)| *t == b) {
                    out.push((b, shown));
                }
            }
        }
    }
    // Depth-first search for a cycle.
    fn visit(
        node: &Vec<String>,
        arrows: &BTreeMap<Vec<String>, Vec<(Vec<String>, Evidence)>>,
        path: &mut Vec<(Vec<String>, Evidence)>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<(Vec<String>, Evidence)>> {
        if let Some(at) = path.iter().position(|(p, _)| p == node) {
            return Some(path[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        for (next, evidence) in arrows.get(node).into_iter().flatten() {
            path.push((node.clone(), evidence.clone()));
            if let Some(cycle) = visit(next, arrows, path, done) {
                return Some(cycle);
            }
            path.pop();
        }
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    for child in &children {
        if let Some(cycle) = visit(child, &arrows, &mut Vec::new(), &mut done) {
            let mut names: Vec<String> = cycle.iter().map(|(m, _)| name_of(m)).collect();
            names.push(name_of(&cycle[0].0));
            let evidence: Vec<String> = cycle.iter().map(|(_, e)| format!("    {e}")).collect();
            // Every module on some circle through this one: the whole knot to untie.
            let reach = |from: &Vec<String>| {
                let mut seen = BTreeSet::from([from.clone()]);
                let mut pending = vec![from.clone()];
                while let Some(node) = pending.pop() {
                    for (next, _) in arrows.get(&node).into_iter().flatten() {
                        if seen.insert(next.clone()) {
                            pending.push(next.clone());
                        }
                    }
                }
                seen
            };
            let first = &cycle[0].0;
            let knot: Vec<String> = reach(first)
                .iter()
                .filter(|m| reach(m).contains(first))
                .map(|m| name_of(m))
                .collect();
            return Some(format!(
                "  among {}'s modules: {}\n{}\n    (all {} modules on a circle with {}: {})",
                name_of(parent),
                names.join(" → "),
                evidence.join("\n"),
                knot.len(),
                name_of(first),
                knot.join(", ")
            ));
        }
    }
    None
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
    dirs.extend(host_library_sources());
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

/// A file's lines outside the items `#[cfg(test)]` gates (as `scan` skips them), each with
/// its number (from 1) and its code before any `//` comment.
fn production_lines(code: &str) -> Vec<(usize, &str)> {
    let (mut gated, mut depth, mut opened) = (false, 0i64, false);
    let mut lines = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if line.trim_start().starts_with("#[cfg(test)]") {
            (gated, depth, opened) = (true, 0, false);
            continue;
        }
        if gated {
            depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            opened |= code.contains('{');
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                gated = false;
            }
            continue;
        }
        lines.push((n + 1, code));
    }
    lines
}

/// Where host code outside the gate makes git that reads a lane's working tree: an
/// `Inert::lane` (`GIT_DIR` with `GIT_WORK_TREE`), or a `GIT_WORK_TREE` of its own.
fn working_tree_git_outside_the_gate(file: &Path, code: &str) -> Vec<String> {
    let root = repo_root();
    let relative = file.strip_prefix(&root).unwrap_or(file);
    // The gate's module and git.rs (which defines `Inert::lane`), in whichever host crate.
    let in_host_src = |tail: &str| {
        relative.starts_with("host")
            && relative
                .to_string_lossy()
                .split("/src/")
                .nth(1)
                .is_some_and(|rest| rest.starts_with(tail))
    };
    if in_host_src("gate/") || in_host_src("gate.rs") || in_host_src("git.rs") {
        return Vec::new();
    }
    production_lines(code)
        .into_iter()
        .filter(|(_, code)| code.contains("Inert::lane(") || code.contains("GIT_WORK_TREE"))
        .map(|(n, line)| format!("{}:{n}: {}", relative.display(), line.trim()))
        .collect()
}

/// Where code reads the machine's clock itself: `SystemTime::now()`, or a `now_ms()` that
/// is no clock's method.
fn wall_clock_reads(file: &Path, code: &str) -> Vec<String> {
    production_lines(code)
        .into_iter()
        .filter(|(_, code)| {
            code.contains("SystemTime::now(")
                || code
                    .match_indices("now_ms()")
                    .any(|(at, _)| !code[..at].ends_with('.') && !code[..at].ends_with("fn "))
        })
        .map(|(n, line)| format!("{}:{n}: {}", file.display(), line.trim()))
        .collect()
}

/// Every "now" of the drive is its clock's (`drive/time.rs`, the one place that reads the
/// machine's): a scenario that moves the clock moves every time the drive writes — the
/// receipts, the live file, a stopped call's end, the dry run's plan.
#[test]
fn the_drive_reads_the_time_only_through_its_clock() {
    let drive = repo_root().join("host/drive/src");
    let mut offenders = Vec::new();
    for file in production_sources()
        .into_iter()
        .filter(|f| f.starts_with(&drive) && !f.ends_with("drive/time.rs"))
    {
        let code = std::fs::read_to_string(&file).unwrap();
        offenders.extend(wall_clock_reads(&file, &code));
    }
    assert!(
        offenders.is_empty(),
        "the drive reads the time past its clock:\n{}",
        offenders.join("\n")
    );
    // The scan finds one where it is made, and not a clock's method nor in a test.
    let made = "fn x() { let t = crate::timestamp::now_ms(); let u = self.clock.now_ms(); }\n\
                #[cfg(test)]\nmod tests { fn y() { SystemTime::now(); } }\n";
    assert_eq!(wall_clock_reads(Path::new("x.rs"), made).len(), 1);
}

/// Everything a sandbox wrote crosses back through one gate: host git reads a lane's
/// working tree only in the records crate's `gate/` (`Tree`, after the walk its purpose needs);
/// elsewhere a lane's git is its history alone (`Inert::history`, a bare repository).
#[test]
fn host_git_reads_a_lanes_working_tree_only_through_the_gate() {
    let host = repo_root().join("host");
    let mut offenders = Vec::new();
    for file in production_sources()
        .into_iter()
        .filter(|f| f.starts_with(&host))
    {
        let code = std::fs::read_to_string(&file).unwrap();
        offenders.extend(working_tree_git_outside_the_gate(&file, &code));
    }
    assert!(
        offenders.is_empty(),
        "host git on a lane's working tree outside the gate:\n{}",
        offenders.join("\n")
    );
    // The scan finds one where it is made, and not in a test.
    let made = "fn x() { Inert::lane(&git, &work).run(&[\"status\"]); }\n\
                #[cfg(test)]\nmod tests { fn y() { Inert::lane(&a, &b); } }\n";
    assert_eq!(
        working_tree_git_outside_the_gate(&host.join("drive/src/drive/x.rs"), made).len(),
        1
    );
    assert!(
        working_tree_git_outside_the_gate(&host.join("records/src/gate/tree.rs"), made).is_empty()
    );
}

/// The most lines a function of production code may take: past it, it is split into named
/// steps (or a table, where it is a long match).
const MOST_FUNCTION_LINES: usize = 120;

/// The files a `#[cfg(test)] mod NAME;` declares: test code in a file of its own.
fn test_module_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            let name = pair[1]
                .trim_start_matches("pub ")
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'));
            if let (true, Some(name)) = (pair[0] == "#[cfg(test)]", name) {
                let stem = file.file_stem().unwrap().to_string_lossy();
                let dir = file.parent().unwrap();
                let dir = if ["lib", "main", "mod"].contains(&stem.as_ref()) {
                    dir.to_path_buf()
                } else {
                    dir.join(stem.as_ref())
                };
                found.insert(dir.join(format!("{name}.rs")));
            }
        }
    }
    found
}

/// Each function of `code` (outside test items) with its first line and its length in lines.
fn function_lengths(code: &str) -> Vec<(String, usize, usize)> {
    let code = without_test_items(&without_literals(code));
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let words: Vec<&str> = lines[at].split_whitespace().collect();
        let name = words
            .iter()
            .position(|w| *w == "fn")
            .filter(|&i| {
                words[..i].iter().all(|w| {
                    w.starts_with("pub") || ["const", "async", "unsafe", "extern"].contains(w)
                })
            })
            .and_then(|i| words.get(i + 1))
            .map(|w| w.split(['(', '<']).next().unwrap_or("").to_string());
        let Some(name) = name else {
            at += 1;
            continue;
        };
        let (mut depth, mut opened, mut end) = (0i64, false, at);
        for (i, line) in lines.iter().enumerate().skip(at) {
            depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            opened |= line.contains('{');
            end = i;
            if (opened && depth <= 0) || (!opened && line.trim_end().ends_with(';')) {
                break;
            }
        }
        found.push((name, at + 1, end - at + 1));
        at = end + 1;
    }
    found
}

/// No function of production code is longer than [`MOST_FUNCTION_LINES`]: no exception.
#[test]
fn no_function_of_production_code_is_longer_than_the_limit() {
    let root = repo_root();
    let files = production_sources();
    let tests = test_module_files(&files);
    let mut long = BTreeSet::new();
    for file in files.iter().filter(|f| !tests.contains(*f)) {
        let relative = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let code = std::fs::read_to_string(file).unwrap();
        for (name, line, length) in function_lengths(&code) {
            if length > MOST_FUNCTION_LINES {
                long.insert((relative.clone(), name, line, length));
            }
        }
    }
    let long: Vec<String> = long
        .iter()
        .map(|(file, name, line, length)| format!("{file}:{line}: {name}, {length} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MOST_FUNCTION_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
    // The scan measures a function whole, and not one in a test.
    let made = "pub(crate) fn long() {\n    let x = \"}\";\n    if x.is_empty() {\n    }\n}\n\
                #[cfg(test)]\nmod tests {\n    fn t() {\n    }\n}\n";
    assert_eq!(function_lengths(made), [("long".to_string(), 1, 5)]);
}
