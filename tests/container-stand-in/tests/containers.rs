//! Containers backed by Docker: lifecycle, streaming, exit codes, signals and JSON shapes.
//! Needs the Docker engine and the lane image `stet-lane:1`.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{assert_ok, stderr, stdout, wait_for, StandIn, LANE_IMAGE};
use serde_json::Value;

fn kill(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// Waits for the child's `ready` line, sends the CLI a TERM, and returns how it ended and
/// the rest of its output.
fn terminate_when_ready(
    child: &mut std::process::Child,
) -> (
    std::process::ExitStatus,
    BufReader<std::process::ChildStdout>,
) {
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert_eq!(line, "ready\n");
    kill(child.id(), "TERM");
    let status = wait_for(child, Duration::from_secs(10)).expect("exits");
    (status, out)
}

#[test]
fn exec_streams_separately_passes_exit_codes_and_stdin() {
    let s = StandIn::new("");
    let o = s.sandbox(
        "sbx-exec",
        &["-l", "stet.managed=true", "--network", "none"],
    );
    assert_ok(&o);
    assert_eq!(stdout(&o), "sbx-exec\n");

    let o = s.run(&[
        "exec",
        "-e",
        "GREETING=hi",
        "-w",
        "/tmp",
        "sbx-exec",
        "sh",
        "-c",
        "echo $GREETING from $(pwd); echo oops >&2; exit 7",
    ]);
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(stdout(&o), "hi from /tmp\n");
    assert_eq!(stderr(&o), "oops\n");

    // Death by signal: 128+N.
    let o = s.run(&["exec", "sbx-exec", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(143));

    // stdin only with -i.
    let mut child = s
        .command(&["exec", "-i", "sbx-exec", "wc", "-l"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"a\nb\nc\n")
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
    let o = s.run(&["exec", "sbx-exec", "wc", "-c"]);
    assert_eq!(stdout(&o).trim(), "0");

    // Options after the container ID belong to the process.
    let o = s.run(&["exec", "sbx-exec", "printf", "[%s]", "-e", "-w", "--", "-i"]);
    assert_ok(&o);
    assert_eq!(stdout(&o), "[-e][-w][--][-i]");

    // Output is streamed, not collected at the end.
    let mut child = s.spawn(&[
        "exec",
        "sbx-exec",
        "sh",
        "-c",
        "echo first; sleep 2; echo second",
    ]);
    let started = Instant::now();
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(lines.next().expect("line").expect("read"), "first");
    assert!(started.elapsed() < Duration::from_millis(1800));
    assert_eq!(lines.next().expect("line").expect("read"), "second");
    assert!(child.wait().expect("wait").success());

    // A missing executable is an error of the CLI, not an exit status of the process.
    let o = s.run(&["exec", "sbx-exec", "no-such-binary"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error: failed to find target executable no-such-binary\n"
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn signals_are_forwarded_and_the_third_one_ends_the_cli() {
    let s = StandIn::new("");
    assert_ok(&s.sandbox("sbx-sig", &[]));

    // SIGTERM to the CLI reaches the process, whose exit status comes back.
    let mut child = s.spawn(&[
        "exec",
        "sbx-sig",
        "sh",
        "-c",
        "trap 'echo got-term; exit 42' TERM; echo ready; while true; do sleep 0.1; done",
    ]);
    let (status, mut out) = terminate_when_ready(&mut child);
    assert_eq!(status.code(), Some(42));
    let mut rest = String::new();
    out.read_to_string(&mut rest).expect("read");
    assert_eq!(rest, "got-term\n");

    // A process that ignores them: the third SIGINT/SIGTERM makes the CLI exit 1 at once,
    // and the process goes on.
    let mut child = s.spawn(&[
        "exec",
        "sbx-sig",
        "sh",
        "-c",
        "trap '' INT TERM; echo ready; sleep 300",
    ]);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    for sig in ["INT", "TERM"] {
        kill(child.id(), sig);
        std::thread::sleep(Duration::from_millis(300));
        assert!(child.try_wait().expect("try_wait").is_none());
    }
    kill(child.id(), "INT");
    let status = wait_for(&mut child, Duration::from_secs(10)).expect("exits");
    assert_eq!(status.code(), Some(1));
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    assert!(err.contains("Received 3 SIGINT/SIGTERM's, forcefully exiting."));
    let o = s.run(&[
        "exec",
        "sbx-sig",
        "sh",
        "-c",
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -q '^sleep 300'",
    ]);
    assert_ok(&o);

    // SIGKILL of the CLI leaves the process running.
    let mut child = s.spawn(&[
        "exec",
        "sbx-sig",
        "sh",
        "-c",
        "echo ready; sleep 5; touch /tmp/survived",
    ]);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    kill(child.id(), "KILL");
    let _ = child.wait();
    std::thread::sleep(Duration::from_secs(6));
    assert_ok(&s.run(&["exec", "sbx-sig", "test", "-e", "/tmp/survived"]));
}

#[test]
fn list_and_inspect_in_the_1x_shape() {
    let s = StandIn::new("");
    let work = s.dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let bind = format!("{}:/work:ro", work.display());
    assert_ok(&s.sandbox(
        "sbx-json",
        &[
            "-l",
            "stet.run=r1",
            "-l",
            "flag",
            "-c",
            "1",
            "-m",
            "512M",
            "-v",
            &bind,
            "-e",
            "A=1",
            "-w",
            "/work",
            "-u",
            "0:0",
        ],
    ));
    let o = s.run(&["create", "--name", "sbx-created", LANE_IMAGE, "true"]);
    assert_ok(&o);

    let o = s.run(&["list", "--format", "json"]);
    assert_ok(&o);
    let text = stdout(&o);
    assert!(!text.contains("\n  "), "compact JSON");
    assert!(text.contains("\\/"), "Foundation escapes slashes");
    let v: Value = serde_json::from_str(&text).expect("json");
    let items = v.as_array().expect("array");
    assert_eq!(items.len(), 1, "running only without --all");
    let c = &items[0];
    assert_eq!(c["id"], "sbx-json");
    assert_eq!(c["status"]["state"], "running");
    assert!(c["status"]["startedDate"]
        .as_str()
        .expect("iso")
        .ends_with('Z'));
    let net = &c["status"]["networks"][0];
    assert!(net["ipv4Address"].as_str().expect("cidr").contains('/'));
    assert_eq!(net["network"], "default");
    let cfg = &c["configuration"];
    assert_eq!(cfg["labels"]["stet.run"], "r1");
    assert_eq!(cfg["labels"]["flag"], "");
    assert_eq!(cfg["resources"]["cpus"], 1);
    assert_eq!(cfg["resources"]["memoryInBytes"], 512u64 * 1024 * 1024);
    assert_eq!(cfg["image"]["reference"], "docker.io/library/stet-lane:1");
    assert_eq!(cfg["initProcess"]["executable"], "sleep");
    assert_eq!(cfg["initProcess"]["arguments"][0], "infinity");
    assert_eq!(cfg["initProcess"]["workingDirectory"], "/work");
    assert_eq!(cfg["initProcess"]["user"]["raw"]["userString"], "0:0");
    assert!(cfg["initProcess"]["environment"]
        .as_array()
        .expect("env")
        .contains(&Value::from("A=1")));
    let m = &cfg["mounts"][0];
    assert!(m["type"]["virtiofs"].is_object());
    assert_eq!(m["source"], work.display().to_string());
    assert_eq!(m["destination"], "/work");
    assert_eq!(m["options"][0], "ro");
    for key in [
        "capAdd",
        "capDrop",
        "creationDate",
        "dns",
        "id",
        "image",
        "initProcess",
        "labels",
        "mounts",
        "networks",
        "platform",
        "publishedPorts",
        "publishedSockets",
        "readOnly",
        "resources",
        "rosetta",
        "runtimeHandler",
        "ssh",
        "sysctls",
        "useInit",
        "virtualization",
    ] {
        assert!(cfg.get(key).is_some(), "configuration.{key}");
    }
    // Keys are sorted.
    let keys: Vec<&str> = text
        .split("\"configuration\":{")
        .nth(1)
        .expect("configuration")
        .split(",\"")
        .map(|k| k.trim_start_matches('"').split('"').next().unwrap_or(""))
        .take(3)
        .collect();
    assert_eq!(keys, ["capAdd", "capDrop", "creationDate"]);

    // The bind mount is read-only and real.
    std::fs::write(work.join("f"), "x").expect("write");
    let o = s.run(&["exec", "sbx-json", "cat", "/work/f"]);
    assert_eq!(stdout(&o), "x");
    let o = s.run(&["exec", "sbx-json", "touch", "/work/g"]);
    assert_ne!(o.status.code(), Some(0));

    let o = s.run(&["list", "--all", "--format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    let created = v
        .as_array()
        .expect("array")
        .iter()
        .find(|c| c["id"] == "sbx-created")
        .expect("created one listed");
    assert_eq!(created["status"]["state"], "stopped");
    assert!(created["status"].get("startedDate").is_none());

    let o = s.run(&["list", "-q"]);
    assert_eq!(stdout(&o), "sbx-json\n");
    let o = s.run(&["list"]);
    assert!(stdout(&o).starts_with("ID        IMAGE"));
    assert!(stdout(&o).contains(" IP "));

    // inspect: pretty, and unknown IDs are an error.
    let o = s.run(&["inspect", "sbx-json"]);
    assert_ok(&o);
    assert!(stdout(&o).starts_with("[\n  {\n    \"configuration\" : {"));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v[0]["id"], "sbx-json");
    let o = s.run(&["inspect", "sbx-json", "nope", "also-nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "Error: container not found: also-nope, nope\n");
    assert!(stdout(&o).is_empty());
}

#[test]
fn list_and_inspect_in_the_0x_shape() {
    let s = StandIn::new("shape = \"0.x\"\n");
    assert_ok(&s.sandbox("sbx-old", &["-l", "k=v"]));
    let o = s.run(&["list", "--format", "json"]);
    assert_ok(&o);
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    let c = &v[0];
    assert_eq!(c["status"], "running", "status is a plain string");
    assert!(
        c["startedDate"].is_f64() || c["startedDate"].is_u64(),
        "seconds since 2001"
    );
    assert!(c["networks"].is_array(), "networks at the top level");
    assert!(c.get("id").is_none());
    assert_eq!(c["configuration"]["id"], "sbx-old");
    assert_eq!(c["configuration"]["labels"]["k"], "v");
    assert!(c["configuration"].get("creationDate").is_none());
    let started = c["startedDate"].as_f64().expect("number");
    let now_2001 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
        - 978_307_200.0;
    assert!((now_2001 - started).abs() < 600.0);

    let o = s.run(&["list"]);
    assert!(stdout(&o).contains(" ADDR "));

    // 0.x: an unknown ID is left out quietly.
    let o = s.run(&["inspect", "nope"]);
    assert_ok(&o);
    assert_eq!(stdout(&o), "[]\n");
    // and errors print in the code form.
    let o = s.run(&["exec", "nope", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error: notFound: \"get failed: container nope not found\"\n"
    );
}

#[test]
fn lifecycle_errors_stop_kill_delete() {
    let s = StandIn::new("");
    assert_ok(&s.sandbox("sbx-life", &[]));

    // Name already in use.
    let o = s.sandbox("sbx-life", &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error: container with id sbx-life already exists\n"
    );

    // Not found, in each command's form.
    let o = s.run(&["exec", "nope", "true"]);
    assert_eq!(stderr(&o), "Error: get failed: container nope not found\n");
    let o = s.run(&["start", "nope"]);
    assert_eq!(stderr(&o), "Error: get failed: container nope not found\n");
    let o = s.run(&["stop", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error: internalError: \"failed to stop container\" (cause: \"notFound: \"container with ID nope not found\"\")\n"
    );
    let o = s.run(&["delete", "--force", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("notFound"));

    // A running container is not deleted without -f.
    let o = s.run(&["delete", "sbx-life"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error: internalError: \"failed to delete container\" (cause: \"invalidState: \"container sbx-life is running and can not be deleted\"\")\n"
    );

    // stop is idempotent; exec on a stopped container fails; kill on it too.
    let o = s.run(&["stop", "-t", "1", "sbx-life"]);
    assert_ok(&o);
    assert_eq!(stdout(&o), "sbx-life\n");
    let o = s.run(&["stop", "sbx-life"]);
    assert_ok(&o);
    assert_eq!(stdout(&o), "sbx-life\n");
    let o = s.run(&["exec", "sbx-life", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "Error: container sbx-life is not running\n");
    let o = s.run(&["kill", "sbx-life"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no runtime client exists: container is stopped"));

    // start brings it back; kill -s KILL stops it; delete removes it.
    let o = s.run(&["start", "sbx-life"]);
    assert_ok(&o);
    assert_ok(&s.run(&["exec", "sbx-life", "true"]));
    let o = s.run(&["kill", "-s", "KILL", "sbx-life"]);
    assert_ok(&o);
    let o = s.run(&["inspect", "sbx-life"]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v[0]["status"]["state"], "stopped");
    assert_ok(&s.run(&["delete", "sbx-life"]));

    // delete -f of a running one.
    assert_ok(&s.sandbox("sbx-force", &[]));
    let o = s.run(&["delete", "-f", "sbx-force"]);
    assert_ok(&o);
    assert_eq!(stdout(&o), "sbx-force\n");
    let o = s.run(&["list", "--all", "--format", "json"]);
    assert_eq!(stdout(&o), "[]\n");
}

#[test]
fn foreground_run_rm_and_images() {
    let s = StandIn::new("missing_images = [\"ghost:1\"]\n");

    // Foreground run: separate streams, exit status passed through, --rm honoured.
    let o = s.run(&[
        "run",
        "--rm",
        "--progress",
        "none",
        "--network",
        "none",
        LANE_IMAGE,
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(stdout(&o), "out\n");
    assert_eq!(stderr(&o), "err\n");
    assert_eq!(stdout(&s.run(&["list", "-a", "-q"])), "");

    // Signals to a foreground run go to the init process.
    let mut child = s.spawn(&[
        "run",
        "--rm",
        "--name",
        "fg",
        "--progress",
        "none",
        LANE_IMAGE,
        "sh",
        "-c",
        "trap 'echo bye; exit 9' TERM; echo ready; while true; do sleep 0.1; done",
    ]);
    let (status, _) = terminate_when_ready(&mut child);
    assert_eq!(status.code(), Some(9));
    // The name is free again once a --rm container is gone.
    let o = s.run(&[
        "run",
        "--rm",
        "--name",
        "fg",
        "--progress",
        "none",
        LANE_IMAGE,
        "true",
    ]);
    assert_ok(&o);

    // --network none must be alone.
    let o = s.run(&[
        "run",
        "--progress",
        "none",
        "--network",
        "none",
        "--network",
        "default",
        LANE_IMAGE,
        "true",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error: no other networks may be created along with network none\n"
    );
    // Labels with '=' in the value, memory below 200 MiB.
    let o = s.run(&[
        "run",
        "--progress",
        "none",
        "-l",
        "a=b=c",
        LANE_IMAGE,
        "true",
    ]);
    assert_eq!(stderr(&o), "Error: invalid label format a=b=c\n");
    let o = s.run(&[
        "run",
        "--progress",
        "none",
        "-m",
        "100M",
        LANE_IMAGE,
        "true",
    ]);
    assert_eq!(
        stderr(&o),
        "Error: minimum memory amount allowed is 200 MiB (got 104857600 bytes)\n"
    );
    // A -v source without '/' is a named volume, with a warning.
    let o = s.run(&[
        "run",
        "--rm",
        "--progress",
        "none",
        "-v",
        "data:/data",
        LANE_IMAGE,
        "true",
    ]);
    assert_ok(&o);
    assert!(stderr(&o).contains("named volume was automatically created"));
    // A --mount bind source must be a directory.
    let file = s.dir.path().join("file");
    std::fs::write(&file, "x").expect("write");
    let spec = format!("type=bind,source={},target=/f", file.display());
    let o = s.run(&[
        "run",
        "--progress",
        "none",
        "--mount",
        &spec,
        LANE_IMAGE,
        "true",
    ]);
    assert_eq!(
        stderr(&o),
        format!("Error: path '{}' is not a directory\n", file.display())
    );

    // Images: present iff Docker has them; the registry answers 401 for the rest.
    let o = s.run(&["image", "inspect", LANE_IMAGE]);
    assert_ok(&o);
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(
        v[0]["configuration"]["name"],
        "docker.io/library/stet-lane:1"
    );
    let o = s.run(&["image", "inspect", "ghost:1"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "Error: image not found: ghost:1\n");
    let o = s.run(&["run", "-d", "--progress", "none", "ghost:1", "sleep", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "Error: HTTP request to https://registry-1.docker.io/v2/library/ghost/manifests/1 failed with response: 401 Unauthorized. Reason: Unknown, no credentials found for host registry-1.docker.io\n"
    );
    let o = s.run(&["image", "pull", "--progress", "none", "no-such-image-here"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("401 Unauthorized"));
    assert_ok(&s.run(&["image", "pull", "--progress", "none", LANE_IMAGE]));
    assert_eq!(stdout(&s.run(&["list", "-a", "-q"])), "");
}
