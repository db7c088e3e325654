//! `stet plugins install` and `stet plugins trust` through the real binary: a plugin is
//! checked, probed, copied into the user plugins directory and its checksum locked; a
//! library that changes, one dropped in by hand, and files others can write are refused,
//! each naming what to do.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use stet_e2e::{plugin_entry, World};

fn user_plugins(world: &World) -> PathBuf {
    world.root.path().join("home/.local/share/stet/plugins")
}

/// A built plugin laid out as a directory to install from.
fn built(world: &World, name: &str) -> PathBuf {
    let source = world.root.path().join("source");
    world.install_into(name, &source);
    source.join(name)
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn an_installed_plugin_is_locked_by_checksum_and_a_changed_library_is_refused_until_trusted() {
    let world = World::new();
    let source = built(&world, "fixture-slow");
    let out = world.run_stet_installed(&["plugins", "install", "--json", source.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let installed = out.json();
    assert_eq!(installed["name"], "fixture-slow");
    let sha = installed["library_sha256"].as_str().unwrap().to_string();
    assert_eq!(sha.len(), 64);
    let dir = user_plugins(&world).join("fixture-slow");
    assert!(dir.join("plugin.toml").is_file());
    let lock = std::fs::read_to_string(user_plugins(&world).parent().unwrap().join("plugins.lock"))
        .unwrap();
    assert!(lock.contains(&sha), "{lock}");
    assert!(lock.contains("name = \"fixture-slow\""), "{lock}");

    // Probe names its version and checksum.
    let probe = world
        .run_stet_installed(&["plugins", "probe", "--json", "fixture-slow"])
        .json();
    let p = plugin_entry(&probe, "fixture-slow");
    assert_eq!(p["status"], "available", "{p:#}");
    assert_eq!(p["library_sha256"], sha.as_str());
    assert_eq!(p["version"], "0.1.0");

    // The library changes behind stet's back: refused, naming the command that trusts it.
    let library = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "so"))
        .unwrap();
    let mut bytes = std::fs::read(&library).unwrap();
    bytes.push(0);
    std::fs::write(&library, bytes).unwrap();
    let list = world
        .run_stet_installed(&["plugins", "list", "--json"])
        .json();
    let p = plugin_entry(&list, "fixture-slow");
    assert_eq!(p["status"], "untrusted", "{p:#}");
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("changed since it was installed"),
        "{detail}"
    );
    assert!(
        detail.contains("stet plugins trust fixture-slow"),
        "{detail}"
    );
    let probe = world.run_stet_installed(&["plugins", "probe", "fixture-slow"]);
    assert_eq!(probe.code, 3, "{}", probe.stdout);
    assert!(probe.stdout.contains("refused"), "{}", probe.stdout);

    let trusted = world.run_stet_installed(&["plugins", "trust", "fixture-slow"]);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    assert!(
        trusted.stdout.starts_with("trusted fixture-slow 0.1.0"),
        "{}",
        trusted.stdout
    );
    let list = world
        .run_stet_installed(&["plugins", "list", "--json"])
        .json();
    assert_eq!(plugin_entry(&list, "fixture-slow")["status"], "ok");
}

#[test]
fn a_plugin_dropped_in_by_hand_and_files_others_can_write_are_refused() {
    let world = World::new();
    // By hand, not through install: nothing in the lock.
    world.install_into("fixture-slow", &user_plugins(&world));
    let list = world
        .run_stet_installed(&["plugins", "list", "--json"])
        .json();
    let p = plugin_entry(&list, "fixture-slow");
    assert_eq!(p["status"], "untrusted", "{p:#}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("not installed through"),
        "{p:#}"
    );

    // A group-writable source is not installed; a group-writable installed copy is refused.
    let source = built(&world, "fixture-slow");
    chmod(&source, 0o775);
    let out = world.run_stet_installed(&["plugins", "install", source.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("writable by its group"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
    chmod(&source, 0o755);
    let out = world.run_stet_installed(&["plugins", "install", source.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    chmod(&user_plugins(&world).join("fixture-slow"), 0o777);
    let list = world
        .run_stet_installed(&["plugins", "list", "--json"])
        .json();
    let p = plugin_entry(&list, "fixture-slow");
    assert_eq!(p["status"], "unsafe-permissions", "{p:#}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("writable by everyone"),
        "{p:#}"
    );
}

#[test]
fn a_plugin_that_fails_its_probe_or_is_not_a_plugin_is_not_installed() {
    let world = World::new();
    let source = built(&world, "fixture-panics");
    let out = world.run_stet_installed(&["plugins", "install", source.to_str().unwrap()]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("failed its probe"), "{}", out.stderr);
    assert!(!user_plugins(&world).join("fixture-panics").exists());

    let empty = world.root.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = world.run_stet_installed(&["plugins", "install", empty.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("is not a plugin"), "{}", out.stderr);
}

#[test]
fn an_uninstalled_plugin_is_gone_with_its_lock_entry_and_other_plugins_are_not_stets_to_remove() {
    let world = World::new();
    let source = built(&world, "fixture-slow");
    let out = world.run_stet_installed(&["plugins", "install", source.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = world.run_stet_installed(&["plugins", "uninstall", "fixture-slow"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("removed fixture-slow 0.1.0 from "),
        "{}",
        out.stdout
    );
    assert!(!user_plugins(&world).join("fixture-slow").exists());
    let lock = std::fs::read_to_string(user_plugins(&world).parent().unwrap().join("plugins.lock"))
        .unwrap();
    assert!(!lock.contains("fixture-slow"), "{lock}");
    // Nothing left in the user directory, not even the rename's leftover.
    assert_eq!(std::fs::read_dir(user_plugins(&world)).unwrap().count(), 0);
    // Again: nothing to remove, said so.
    let again = world.run_stet_installed(&["plugins", "uninstall", "fixture-slow"]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains("no plugin fixture-slow is installed in"),
        "{}",
        again.stderr
    );
    // A plugin on another directory of the search path is named where it is, and kept.
    world.install("docker");
    let elsewhere = world.run_stet(&["plugins", "uninstall", "docker"]);
    assert_eq!(elsewhere.code, 2, "{}", elsewhere.stderr);
    assert!(
        elsewhere
            .stderr
            .contains("which stet plugins install did not make"),
        "{}",
        elsewhere.stderr
    );
    assert!(world.plugins.join("docker/plugin.toml").is_file());
}

#[test]
fn an_installed_stet_finds_its_plugins_and_a_copy_moved_away_says_where_it_looked() {
    let world = World::new();
    let prefix = world.root.path().join("prefix");
    xtask::assemble_dist(&stet_e2e::artifacts(), &prefix).unwrap();
    let installed = prefix.join("bin/stet");
    let list = world.run(&mut world.command(&installed, &["plugins", "list", "--json"], false));
    assert_eq!(list.code, 0, "{}", list.stderr);
    let json = list.json();
    for name in ["docker", "claude", "command"] {
        let p = plugin_entry(&json, name);
        assert_eq!(p["status"], "ok", "{p:#}");
        assert_eq!(p["found_in"], "beside-executable", "{p:#}");
    }
    // Installed again over itself (an upgrade): still whole, nothing staged left behind.
    xtask::assemble_dist(&stet_e2e::artifacts(), &prefix).unwrap();
    let names: Vec<String> = std::fs::read_dir(prefix.join("lib/stet"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["plugins"]);

    let away = world.root.path().join("elsewhere/bin");
    std::fs::create_dir_all(&away).unwrap();
    std::fs::copy(&installed, away.join("stet")).unwrap();
    for args in [
        &["plugins", "list"][..],
        &["plugins", "probe"],
        &["run", "--", "true"],
    ] {
        let out = world.run(&mut world.command(&away.join("stet"), args, false));
        assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr
                .contains("error: no plugins found: stet has no runtime and no harness to run"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&format!(
                "looked in {} (beside the executable)",
                world
                    .root
                    .path()
                    .join("elsewhere/lib/stet/plugins")
                    .display()
            )),
            "{args:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr
                .contains("hint: install stet with its plugins (cargo xtask install"),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn version_names_the_plugin_api_and_the_commit() {
    let world = World::new();
    let out = world.run_stet(&["--version"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let line = out.stdout.trim();
    let rest = line
        .strip_prefix("stet 0.1.0 (plugin API 1.7.0, commit ")
        .unwrap_or_else(|| panic!("{line}"));
    let commit = rest.strip_suffix(')').unwrap();
    // Built from this checkout (the build script follows HEAD): its commit.
    let head = stet_e2e::git(&xtask::repo_root(), &["rev-parse", "--short=12", "HEAD"]);
    assert_eq!(commit, head.trim(), "{line}");
}
