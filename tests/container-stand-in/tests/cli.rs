//! The command line, the service switch and fault injection: no container is started here.

mod common;

use std::time::Duration;

use common::{assert_ok, stderr, stdout, wait_for, StandIn};

#[test]
fn version_line_per_shape() {
    let s = StandIn::new("");
    let o = s.run(&["--version"]);
    assert_ok(&o);
    assert_eq!(
        stdout(&o),
        "container CLI version 1.2.2 (build: release, commit: 0000000)\n"
    );
    s.set_settings("shape = \"0.x\"\n");
    assert_eq!(
        stdout(&s.run(&["--version"])),
        "container CLI version 0.12.3 (build: release, commit: 0000000)\n"
    );
}

#[test]
fn unknown_flags_and_missing_arguments_exit_64_with_usage() {
    let s = StandIn::new("");
    let o = s.run(&["run", "--detatch", "stet-lane:1"]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        stderr(&o),
        "Error: Unknown option '--detatch'. Did you mean '--detach'?\n\
         Usage: container run [<options>] <image> [<arguments> ...]\n  \
         See 'container run --help' for more information.\n"
    );
    assert!(stdout(&o).is_empty());

    let o = s.run(&["exec"]);
    assert_eq!(o.status.code(), Some(64));
    assert_eq!(
        stderr(&o),
        "Error: Missing expected argument '<container-id>'\n\
         Help:  <container-id>  Container ID\n\
         Usage: container exec [<options>] <container-id> <arguments> ...\n  \
         See 'container exec --help' for more information.\n"
    );

    let o = s.run(&["stop", "-t"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with("Error: Missing value for '-t <time>'\n"));

    let o = s.run(&["list", "--format", "xml"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with(
        "Error: The value 'xml' is invalid for '--format <format>'. Please provide one of 'json', 'table', 'yaml' or 'toml'.\n"
    ));

    // -a is --arch on run, --all on list; -d takes no value.
    let o = s.run(&["list", "--detach"]);
    assert_eq!(o.status.code(), Some(64));
    let o = s.run(&["run", "--detach=true", "x"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with(
        "Error: The option '--detach' does not take any value, but 'true' was specified.\n"
    ));

    // An unknown subcommand is a plugin lookup.
    let o = s.run(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with("Error: Plugin 'container-frobnicate' not found.\n"));
    assert!(stderr(&o).contains("Usage: container [--debug] <subcommand>\n"));

    let o = s.run(&["image", "frobnicate"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with("Error: Unexpected argument 'frobnicate'\n"));

    // Three dashes are refused before anything else, even in what would be the argv.
    let o = s.run(&["exec", "sbx", "echo", "---"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with("Error: Invalid option: ---\n"));
}

#[test]
fn list_has_no_filter_flag() {
    let s = StandIn::new("");
    let o = s.run(&["list", "--all", "--filter", "label=stet.managed=true"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(stderr(&o).starts_with("Error: Unknown option '--filter'\n"));
    assert!(stderr(&o)
        .contains("Usage: container list [--all] [--format <format>] [--quiet] [--debug]\n"));
}

#[test]
fn validation_errors_of_commands_exit_1_without_usage() {
    let s = StandIn::new("");
    let o = s.run(&["stop"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error: no containers specified and --all not supplied\n"
    );
    let o = s.run(&["delete", "--all", "x"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error: explicitly supplied container ID(s) conflict with the --all flag\n"
    );
    // Checked before any image is looked at.
    for (args, text) in [
        (
            vec!["run", "--name", "a", "x"],
            "Error: container ID a is not a valid container ID\n",
        ),
        (vec!["run", "--name", &"x".repeat(64), "x"], ""),
    ] {
        let o = s.run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        if !text.is_empty() {
            assert_eq!(stderr(&o), text);
        }
    }
}

#[test]
fn service_down_until_system_start() {
    let s = StandIn::new("service = \"down\"\n");
    let hint = "Ensure container system service has been started with `container system start`.\n";

    let o = s.run(&["system", "status"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stdout(&o),
        "apiserver is not running and not registered with launchd\n"
    );

    let o = s.run(&["list", "--all", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("Error: internalError: \"failed to list containers\" (cause: \"interrupted: \"XPC connection error: Connection invalid\"\")\n{hint}")
    );

    let o = s.run(&["run", "-d", "stet-lane:1", "sleep", "infinity"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("Error: interrupted: \"XPC connection error: Connection invalid\"\n{hint}")
    );

    for args in [
        vec!["exec", "x", "true"],
        vec!["stop", "x"],
        vec!["delete", "-f", "x"],
        vec!["image", "inspect", "stet-lane:1"],
        vec!["inspect", "x"],
    ] {
        let o = s.run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains("XPC connection error"), "{args:?}");
        assert!(stderr(&o).ends_with(hint), "{args:?}");
    }

    // --version needs no service.
    assert_ok(&s.run(&["--version"]));

    let o = s.run(&["system", "start", "--enable-kernel-install"]);
    assert_ok(&o);
    let o = s.run(&["system", "status"]);
    assert_ok(&o);
    assert!(stdout(&o).starts_with("FIELD "));
    let o = s.run(&["system", "status", "--format", "json"]);
    assert_ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["status"], "running");
    let o = s.run(&["list"]);
    assert_ok(&o);
    assert!(stdout(&o).starts_with("ID "));

    let o = s.run(&["system", "stop"]);
    assert_ok(&o);
    assert_eq!(s.run(&["system", "status"]).status.code(), Some(1));
}

#[test]
fn hang_setting_makes_the_named_subcommand_hang() {
    let s = StandIn::new("hang = [\"system status\"]\n");
    let mut child = s.spawn(&["system", "status"]);
    assert!(
        wait_for(&mut child, Duration::from_millis(1500)).is_none(),
        "system status should hang"
    );
    // Other commands are unaffected.
    assert_ok(&s.run(&["system", "version"]));
    // A parse error still comes first.
    let o = s.run(&["system", "status", "--bogus"]);
    assert_eq!(o.status.code(), Some(64));
}

#[test]
fn bad_settings_are_reported() {
    let s = StandIn::new("shape = \"2.x\"\n");
    let o = s.run(&["--version"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("stand-in"));
}
