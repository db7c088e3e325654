//! The claude harness through the real `stet` binary: the real Claude Code CLI (2.1.332)
//! in a real Docker sandbox, walled by stet's settings, hooks and approver, talking to a
//! fake Messages API on the host's loopback, reached the one way a sandbox reaches anything:
//! through stet's proxy (the sandbox has no interface but its own loopback; the fake's
//! `127.0.0.1:PORT` is the harness's declared model API). The login is a dummy made only
//! for the fake.

use std::path::PathBuf;

use serde_json::{json, Value};
use stet_e2e::fake_api::{FakeApi, Reply};
use stet_e2e::oauth_double::{Answer, OauthDouble};
use stet_e2e::{claude_binary, wall, walled_claude_config, walled_claude_setup, World};

struct Claude {
    world: World,
    api: FakeApi,
    profile: PathBuf,
}

/// A world with docker and claude installed, one walled profile holding a dummy stored
/// login, and stet.toml pointing the harness at `api`.
fn claude_world(api: FakeApi) -> Claude {
    let world = World::new();
    let config = walled_claude_setup(&world, &claude_binary().display().to_string(), &api.url, "");
    world.repo_config(&config);
    let profile = world.root.path().join("profiles/claude");
    Claude {
        world,
        api,
        profile,
    }
}

fn configure(world: &World, api: &FakeApi, binary: &str) {
    world.repo_config(&walled_claude_config(world, binary, &api.url, ""));
}

/// A fake model that asks for one Bash call of `command`, then ends the turn.
fn asks_to_run(command: &'static str) -> FakeApi {
    FakeApi::start(move |request| {
        if request.tool_results().is_empty() {
            Reply::ToolUse {
                name: "Bash".into(),
                input: json!({"command": command, "description": "as asked"}),
            }
        } else {
            Reply::Text("finished".into())
        }
    })
}

#[test]
fn the_walls_hold_end_to_end_with_the_real_cli_in_a_sandbox() {
    let c = claude_world(asks_to_run("stet-wall-canary"));
    let out = c.world.run_stet(&["walls", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    for name in [
        "profile-alone",
        "login-present",
        "settings-exact",
        "no-billing-key",
        "proof-tool-list",
        "proof-approver-connected",
        "proof-hooks-fired",
        "proof-no-memory",
        "proof-guard-refused-canary",
        // The runtime's walls, proven by the host for every harness.
        "lane-only",
        "env-from-launch",
        "network-as-launched",
        // Claude Code declares its model API (the fake, on the host's loopback): reached
        // through stet's proxy, a second listener refused.
        "egress-allow-list",
        // The login stayed on the host: nothing inside has its fingerprint, and the proof's
        // requests had it swapped in at stet's gateway.
        "credential-not-in-sandbox",
    ] {
        assert_eq!(wall(&json, name)["held"], true, "{name}: {json:#}");
    }
    assert_eq!(json["runtime"], "docker");
    let fake = c
        .api
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/');
    assert_eq!(
        json["network"],
        format!("only {fake} (through stet's proxy)"),
        "the proof names the one host the sandbox could reach: {json:#}"
    );
    // The settings stet wrote hold its hooks, naming the stet binary by absolute path.
    let settings = std::fs::read_to_string(c.profile.join("settings.json")).unwrap();
    assert!(settings.contains(" hook guard\""), "{settings}");
    // The model was offered exactly the proof's tool list.
    let first = &c.api.requests()[0];
    // (Claude Code adds an internal placeholder for tools it defers; it is not a tool.)
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|name| *name != "DeferredToolPlaceholder")
        .collect();
    assert_eq!(tools, ["Bash"], "{tools:?}");
    // The session hooks fired inside the sandbox and were recorded.
    let events: Vec<&str> = json["session"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["event"].as_str())
        .collect();
    assert!(
        events.contains(&"session-start") && events.contains(&"session-end"),
        "{events:?}"
    );
}

#[test]
fn edited_settings_are_replaced_and_said_so() {
    let c = claude_world(asks_to_run("stet-wall-canary"));
    std::fs::write(
        c.profile.join("settings.json"),
        r#"{"permissions":{"allow":["Bash"]}}"#,
    )
    .unwrap();
    let out = c.world.run_stet(&["walls"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("note: the walled settings had been edited and were replaced"),
        "{}",
        out.stdout
    );
    let settings = std::fs::read_to_string(c.profile.join("settings.json")).unwrap();
    assert!(!settings.contains("permissions"));
    // The login beside it is untouched.
    assert!(c.profile.join(".credentials.json").exists());
}

#[test]
fn without_the_guard_the_live_proof_fails_and_names_the_wall() {
    let c = claude_world(asks_to_run("stet-wall-canary"));
    let stet = stet_e2e::artifacts().join("stet");
    std::fs::write(
        c.profile.join("settings.json"),
        json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": format!("{} hook session-start", stet.display())}]}]}})
            .to_string(),
    )
    .unwrap();
    let out = c.world.run_stet(&["walls", "--keep-settings", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 3, "{json:#}");
    assert_eq!(wall(&json, "settings-exact")["held"], false);
    assert_eq!(
        wall(&json, "proof-guard-refused-canary")["held"],
        false,
        "{json:#}"
    );
    assert_eq!(wall(&json, "proof-hooks-fired")["held"], true, "{json:#}");
    // With the guard gone, the approver still refused the canary: a second wall stood.
    let approvals: Vec<&Value> = json["session"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "approval")
        .collect();
    assert!(
        approvals.iter().any(|a| a["behavior"] == "deny"),
        "{json:#}"
    );
}

#[test]
fn an_invalid_settings_file_is_dropped_by_the_cli_and_the_proof_says_so() {
    let c = claude_world(asks_to_run("stet-wall-canary"));
    // Schema-invalid: Claude Code drops the whole file silently, hooks included.
    std::fs::write(
        c.profile.join("settings.json"),
        r#"{"hooks":{"PreToolUse":"not a list"}}"#,
    )
    .unwrap();
    let out = c.world.run_stet(&["walls", "--keep-settings", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 3, "{json:#}");
    assert_eq!(wall(&json, "proof-hooks-fired")["held"], false, "{json:#}");
    assert_eq!(wall(&json, "proof-guard-refused-canary")["held"], false);
}

#[test]
fn no_login_is_recognised_and_stops_before_the_live_launch() {
    let c = claude_world(asks_to_run("stet-wall-canary"));
    std::fs::remove_file(c.profile.join(".credentials.json")).unwrap();
    let out = c.world.run_stet(&["walls"]);
    assert_eq!(out.code, 3, "{}", out.stdout);
    assert!(
        out.stdout.contains("BROKEN  login-present"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("not logged in"), "{}", out.stdout);
    assert!(out.stdout.contains(&format!(
        "hint: log in once in your own shell: CLAUDE_CONFIG_DIR={} claude",
        c.profile.display()
    )));
    assert!(c.api.requests().is_empty(), "no model call without a login");
}

#[test]
fn a_billing_key_in_the_environment_breaks_a_wall() {
    let c = claude_world(asks_to_run("stet-wall-canary"));
    let out = c.world.run(
        c.world
            .stet(&["walls"])
            .env("ANTHROPIC_API_KEY", "dummy-key-for-this-test"),
    );
    assert_eq!(out.code, 3);
    assert!(
        out.stdout.contains("BROKEN  no-billing-key"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("ANTHROPIC_API_KEY"));
    assert!(
        !out.stdout.contains("dummy-key-for-this-test"),
        "a key's value is never printed"
    );
}

#[test]
fn none_or_several_profiles_are_refused_by_name() {
    let c = claude_world(asks_to_run("stet-wall-canary"));
    std::fs::create_dir_all(c.world.root.path().join("profiles/second")).unwrap();
    let out = c.world.run_stet(&["walls"]);
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.contains("there are 2 profiles in"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("(claude, second)"), "{}", out.stderr);
}

#[test]
fn ask_runs_an_approved_command_and_reports_cost_and_usage() {
    let c = claude_world(asks_to_run("touch made-by-the-agent"));
    let out = c.world.run_stet(&["ask", "--json", "make", "a", "file"]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    assert_eq!(json["outcome"], "done");
    assert_eq!(json["detail"], "finished");
    assert!(json["cost_usd"].as_f64().unwrap() > 0.0, "{json:#}");
    assert!(
        json["usage"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u[0] == "input_tokens"),
        "{json:#}"
    );
    assert!(
        c.world.work.join("made-by-the-agent").exists(),
        "the approved command ran in the lane"
    );
    let approvals: Vec<&Value> = json["session"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "approval")
        .collect();
    assert_eq!(approvals.len(), 1, "{json:#}");
    assert_eq!(approvals[0]["behavior"], "allow");
    // The prompt reached the model on stdin.
    assert!(c.api.requests()[0].body.to_string().contains("make a file"));
    // The sandbox held a stand-in; stet's gateway swapped the login in on the way to the
    // model API, and only there.
    for request in c.api.requests() {
        let auth = request
            .headers
            .iter()
            .find(|(name, _)| name == "authorization")
            .map(|(_, v)| v.as_str());
        assert_eq!(
            auth,
            Some(format!("Bearer {}", stet_e2e::DUMMY_ACCESS_TOKEN).as_str()),
            "{:?}",
            request.headers
        );
        assert!(!request
            .body
            .to_string()
            .contains(stet_e2e::DUMMY_ACCESS_TOKEN));
    }
    // In a repository the call left a receipt, with its full output beside it.
    let receipts = stet_e2e::receipts_oldest_first(&c.world.run_stet(&["receipts", "--json"]));
    let receipt = &receipts[0];
    assert_eq!(receipt["role"], "implement");
    assert_eq!(receipt["outcome"], "done");
    assert_eq!(receipt["runtime"]["name"], "docker");
    assert_eq!(receipt["harness"]["name"], "claude");
    assert_eq!(
        receipt["harness"]["library_sha256"].as_str().unwrap().len(),
        64
    );
    assert!(receipt["cost_usd"].as_f64().unwrap() > 0.0);
    let log = std::fs::read_to_string(receipt["log"].as_str().unwrap()).unwrap();
    assert!(log.contains("\"type\":\"result\""), "{log}");
    // The receipt names the allowed hosts; the real CLI, with its nonessential traffic off,
    // asked the proxy for nothing but its model API.
    let fake = c
        .api
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/');
    assert_eq!(
        receipt["network"],
        format!("only {fake} (through stet's proxy)")
    );
    assert_eq!(
        receipt["network_blocked"],
        serde_json::json!([]),
        "{receipt:#}"
    );
}

/// The repository's rules reach the real Claude Code through stet's rules hook, each file
/// once (Claude Code's own loading of `CLAUDE.md` is off in a walled launch), and the
/// call's prompt is kept with its receipt.
#[test]
fn the_rules_files_reach_the_real_cli_through_the_rules_hook_and_the_prompt_is_kept() {
    let c = claude_world(FakeApi::start(|_| Reply::Text("read them".into())));
    std::fs::write(
        c.world.work.join("AGENTS.md"),
        "Rule from AGENTS: use tabs.\n",
    )
    .unwrap();
    std::fs::write(
        c.world.work.join("CLAUDE.md"),
        "Rule from CLAUDE: no emoji.\n",
    )
    .unwrap();
    let out = c
        .world
        .run_stet(&["ask", "--json", "follow", "the", "rules"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let sent = c.api.requests()[0].body.to_string();
    for (file, rule) in [
        ("AGENTS.md", "Rule from AGENTS: use tabs."),
        ("CLAUDE.md", "Rule from CLAUDE: no emoji."),
    ] {
        let handed = format!("The repository's rules ({file}):");
        assert!(
            sent.contains(&handed),
            "{file} not handed by the hook: {sent}"
        );
        assert_eq!(
            sent.matches(rule).count(),
            1,
            "{rule} reached the model other than once: {sent}"
        );
    }
    let receipts = stet_e2e::receipts_oldest_first(&c.world.run_stet(&["receipts", "--json"]));
    let prompt = &receipts[0]["prompt"];
    assert_eq!(prompt["bytes"], "follow the rules".len(), "{prompt:#}");
    assert_eq!(
        std::fs::read_to_string(prompt["file"].as_str().unwrap()).unwrap(),
        "follow the rules"
    );
}

#[test]
fn the_guard_refuses_a_push_and_the_agent_is_told_why() {
    let c = claude_world(asks_to_run("git push origin HEAD"));
    let out = c.world.run_stet(&["ask", "--json", "ship it"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let requests = c.api.requests();
    let results = requests.last().unwrap().tool_results();
    let text = results[0].to_string();
    assert!(
        text.contains("refused by stet guard: `git push` talks to a remote"),
        "{text}"
    );
    assert_eq!(results[0]["is_error"], true);
}

#[test]
fn a_usage_limit_is_rate_limited_until_the_reset() {
    let api = FakeApi::start(|_| Reply::Error {
        status: 429,
        headers: vec![
            (
                "anthropic-ratelimit-unified-status".into(),
                "rejected".into(),
            ),
            (
                "anthropic-ratelimit-unified-reset".into(),
                "1893456000".into(),
            ),
        ],
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "usage limit reached"}}),
    });
    let c = claude_world(api);
    let out = c.world.run_stet(&["ask", "--json", "anything"]);
    let json = out.json();
    assert_eq!(out.code, 3, "{json:#}");
    assert_eq!(json["outcome"], "rate-limited");
    assert_eq!(json["retry_at_unix"], 1893456000);
}

/// A model API answering 500 is the model API down (infrastructure), not the agent failing
/// its task: said as such, with the reason, and the call could not be made (3).
#[test]
fn an_api_error_is_the_service_unavailable_with_its_reason() {
    let api = FakeApi::start(|_| Reply::Error {
        status: 500,
        headers: vec![],
        body: json!({"type": "error", "error": {"type": "api_error", "message": "the fake fell over"}}),
    });
    let c = claude_world(api);
    let out = c.world.run_stet(&["ask", "--json", "anything"]);
    let json = out.json();
    assert_eq!(out.code, 3, "{json:#}");
    assert_eq!(json["outcome"], "service-unavailable");
    assert!(json["detail"].as_str().unwrap().contains("500"), "{json:#}");
}

/// For answers the fake cannot give: a stand-in `claude` that answers `--version` and
/// `auth status` like the real one, then prints something that is not stream-json.
#[test]
fn output_out_of_shape_is_recognised() {
    let c = claude_world(asks_to_run("true"));
    let stand_in = c.world.root.path().join("stand-in-claude");
    stet_exec_support::write_executable(
        &stand_in,
        b"#!/bin/sh\ncase \"$1\" in\n  --version) echo '2.1.332 (Claude Code)';;\n  auth) echo '{\"loggedIn\":true,\"authMethod\":\"claude.ai\"}';;\n  *) cat >/dev/null; echo 'this is not stream-json';;\nesac\n",
    )
    .unwrap();
    configure(&c.world, &c.api, &stand_in.display().to_string());
    let out = c.world.run_stet(&["ask", "--json", "anything"]);
    let json = out.json();
    assert_eq!(out.code, 4, "{json:#}");
    assert_eq!(json["outcome"], "out-of-shape");
    assert!(
        json["detail"].as_str().unwrap().contains("no result line"),
        "{json:#}"
    );
}

/// Writes `keys` to the child's terminal once it has printed `prompt`, then collects what
/// it printed.
fn on_terminal(
    mut command: std::process::Command,
    prompt: &'static str,
    keys: &'static [u8],
) -> (i32, String) {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (chunks, printed) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer) {
            if n == 0 || chunks.send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(prompt) {
        match printed.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => panic!(
                "no `{prompt}` on the terminal: {}",
                String::from_utf8_lossy(&seen)
            ),
        }
    }
    stdin.write_all(keys).unwrap();
    stdin.flush().unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    reader.join().unwrap();
    seen.extend(printed.try_iter().flatten());
    let mut stderr = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&seen).into_owned() + &stderr,
    )
}

fn stand_in_login(world: &World) -> PathBuf {
    let stand_in = world.root.path().join("stand-in-claude");
    stet_exec_support::write_executable(
        &stand_in,
        r#"#!/bin/sh
case "$1 $2" in
  "--version "*) echo '2.1.332 (Claude Code)';;
  "auth status") if [ -f "$CLAUDE_CONFIG_DIR/.credentials.json" ]; then echo '{"loggedIn":true,"authMethod":"claude.ai"}'; else echo '{"loggedIn":false,"authMethod":"none"}'; exit 1; fi;;
  "auth login") [ -t 0 ] && echo "stand-in: on a terminal"; printf 'Paste code here > '; read code; echo "{\"stand-in\":\"$code\"}" > "$CLAUDE_CONFIG_DIR/.credentials.json"; echo "Login successful.";;
esac
"#
        .as_bytes(),
    )
    .unwrap();
    stand_in
}

/// The login is the agent's own, on a terminal, in a sandbox: a stand-in `claude` that
/// behaves like the real login (a prompt, a code typed in, the login written into
/// CLAUDE_CONFIG_DIR) shows the keystrokes and the written login crossing the wall.
#[test]
fn profile_login_runs_the_agents_login_on_a_terminal_in_a_sandbox() {
    let c = claude_world(asks_to_run("true"));
    std::fs::remove_dir_all(&c.profile).unwrap();
    let stand_in = stand_in_login(&c.world);
    configure(&c.world, &c.api, &stand_in.display().to_string());
    let (code, output) = on_terminal(
        c.world.stet_on_terminal(&["profile", "login"]),
        "Paste code here",
        b"typed-code\r",
    );
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("created the walled profile"), "{output}");
    assert!(output.contains("stand-in: on a terminal"), "{output}");
    assert!(output.contains("has a login"), "{output}");
    let written = std::fs::read_to_string(c.profile.join(".credentials.json")).unwrap();
    assert_eq!(written.trim(), r#"{"stand-in":"typed-code"}"#);
}

/// The real Claude Code login starts inside the sandbox and shows its sign-in page; no one
/// can finish it here, so Ctrl-C ends it and no login is recorded.
#[test]
fn profile_login_starts_the_real_login_and_ctrl_c_ends_it() {
    let c = claude_world(asks_to_run("true"));
    std::fs::remove_file(c.profile.join(".credentials.json")).unwrap();
    let (code, output) = on_terminal(
        c.world.stet_on_terminal(&["profile", "login"]),
        "oauth/authorize",
        b"\x03",
    );
    assert!(
        output.contains("https://claude.ai/oauth/authorize"),
        "{output}"
    );
    assert!(output.contains("no login was recorded"), "{output}");
    assert_eq!(code, 3, "{output}");
}

#[test]
fn profile_login_needs_a_terminal() {
    let c = claude_world(asks_to_run("true"));
    let out = c.world.run_stet(&["profile", "login"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("stet profile login needs a terminal"),
        "{}",
        out.stderr
    );
}

/// A model API that does not answer is named by the proof (`proof-model-api-unreachable`,
/// state unreachable), not taken for a broken wall (a guard hook that did not run); a
/// drive refuses saying the walls could not be proven.
#[test]
fn a_model_api_that_does_not_answer_is_named_by_the_proof_not_taken_for_a_broken_wall() {
    let world = World::new();
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let config = walled_claude_setup(&world, &claude_binary().display().to_string(), &url, "");
    world.clone_of_fresh_remote();
    world.repo_config(&config);
    let out = world.run_stet(&["walls", "--json"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    let json = out.json();
    let unreachable = wall(&json, "proof-model-api-unreachable");
    assert_eq!(unreachable["state"], "unreachable", "{json:#}");
    assert!(
        unreachable["detail"]
            .as_str()
            .unwrap()
            .contains("did not reach the model API"),
        "{json:#}"
    );
    let walls: Vec<&str> = json["walls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["wall"].as_str().unwrap())
        .collect();
    assert!(
        !walls.contains(&"proof-guard-refused-canary"),
        "no hook is blamed: {walls:?}"
    );
    let text = world.run_stet(&["walls"]);
    assert!(
        text.stdout
            .contains("UNREACHABLE  proof-model-api-unreachable"),
        "{}",
        text.stdout
    );
    world.add_pushed("Anything");
    let drive = world.run_stet(&["drive", "--yes"]);
    assert_eq!(drive.code, 3, "{}", drive.stderr);
    assert!(
        drive
            .stderr
            .contains("the walls could not be proven; nothing was reserved"),
        "{}",
        drive.stderr
    );
}

/// The unix time `secs` from now.
fn in_secs(secs: u64) -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + secs
}

/// A fake model that meets its first `limited` requests with a usage limit resetting
/// `reset_in` seconds after each, then runs the proof's canary when asked.
fn limited_first(limited: usize, reset_in: u64) -> FakeApi {
    let seen = std::sync::atomic::AtomicUsize::new(0);
    FakeApi::start(move |request| {
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < limited {
            return Reply::Error {
                status: 429,
                headers: vec![
                    (
                        "anthropic-ratelimit-unified-status".into(),
                        "rejected".into(),
                    ),
                    (
                        "anthropic-ratelimit-unified-reset".into(),
                        in_secs(reset_in).to_string(),
                    ),
                ],
                body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "usage limit reached"}}),
            };
        }
        if request.tool_results().is_empty() {
            Reply::ToolUse {
                name: "Bash".into(),
                input: json!({"command": "stet-wall-canary", "description": "as asked"}),
            }
        } else {
            Reply::Text("finished".into())
        }
    })
}

/// The names of the walls a proof reported.
fn wall_names(json: &Value) -> Vec<String> {
    json["walls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["wall"].as_str().unwrap().to_string())
        .collect()
}

/// A usage limit met by the proof is named as itself (not a guard hook that did not run),
/// with its reset; a drive waits for the reset as it would for any call's, proves the
/// walls again, and goes on.
#[test]
fn a_usage_limit_at_the_proof_is_named_as_itself_and_a_drive_waits_for_its_reset() {
    let world = World::new();
    // Limited for `stet walls`, then for the drive's first proof.
    let api = limited_first(2, 2);
    let config = walled_claude_setup(&world, &claude_binary().display().to_string(), &api.url, "");
    world.clone_of_fresh_remote();
    world.repo_config(&config);
    let out = world.run_stet(&["walls", "--json"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    let json = out.json();
    let limited = wall(&json, "proof-usage-limited");
    assert_eq!(limited["state"], "usage-limited", "{json:#}");
    assert!(
        limited["detail"]
            .as_str()
            .unwrap()
            .contains("the login's usage limit, which resets at "),
        "{json:#}"
    );
    assert_eq!(json["unserved"]["kind"], "usage-limited", "{json:#}");
    assert!(
        !wall_names(&json).contains(&"proof-guard-refused-canary".to_string()),
        "no hook is blamed: {json:#}"
    );
    // The drive waits for the reset, proves the walls again, and goes on (an empty queue).
    let drive = world.run_stet(&["drive", "--yes", "--wait-floor", "1s"]);
    assert_eq!(drive.code, 0, "{}", drive.stderr);
    assert!(
        drive
            .stderr
            .contains("the agent hit its usage limit while the walls were proven: waiting until "),
        "{}",
        drive.stderr
    );
    assert!(
        drive.stderr.contains("stet drive: 0 items"),
        "{}",
        drive.stderr
    );
}

/// A usage limit at the proof that resets later than the outage limit refuses the drive at
/// once, saying when to drive again.
#[test]
fn a_usage_limit_at_the_proof_resetting_past_the_outage_limit_refuses_saying_when() {
    let world = World::new();
    let api = limited_first(usize::MAX, 86_400);
    let config = walled_claude_setup(&world, &claude_binary().display().to_string(), &api.url, "");
    world.clone_of_fresh_remote();
    world.repo_config(&config);
    let drive = world.run_stet(&["drive", "--yes", "--outage-limit", "1h"]);
    assert_eq!(drive.code, 3, "{}", drive.stderr);
    assert!(
        drive
            .stderr
            .contains("later than the outage limit (1h); nothing was reserved")
            && drive.stderr.contains("hint: run stet drive again after "),
        "{}",
        drive.stderr
    );
    assert!(!drive.stderr.contains("waiting until"), "{}", drive.stderr);
}

/// A login the model API refuses (401) at the proof is named as itself, with what to do
/// (log in again), not taken for a guard hook that did not run; a drive refuses at once.
#[test]
fn a_login_the_model_api_refuses_at_the_proof_is_named_with_how_to_log_in_again() {
    let world = World::new();
    let api = FakeApi::start(|_| Reply::Error {
        status: 401,
        headers: vec![],
        body: json!({"type": "error", "error": {"type": "authentication_error", "message": "OAuth token has expired"}}),
    });
    let config = walled_claude_setup(&world, &claude_binary().display().to_string(), &api.url, "");
    world.clone_of_fresh_remote();
    world.repo_config(&config);
    let out = world.run_stet(&["walls", "--json"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    let json = out.json();
    let refused = wall(&json, "proof-login-refused");
    assert_eq!(refused["state"], "login-refused", "{json:#}");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("the model API refused the profile's login"),
        "{json:#}"
    );
    assert!(
        refused["remedy"]
            .as_str()
            .unwrap()
            .starts_with("log in again: stet profile login"),
        "{json:#}"
    );
    assert!(
        !wall_names(&json).contains(&"proof-guard-refused-canary".to_string()),
        "no hook is blamed: {json:#}"
    );
    world.add_pushed("Anything");
    let drive = world.run_stet(&["drive", "--yes"]);
    assert_eq!(drive.code, 3, "{}", drive.stderr);
    assert!(
        drive
            .stderr
            .contains("the walls could not be proven; nothing was reserved")
            && drive
                .stderr
                .contains("hint: log in again: stet profile login"),
        "{}",
        drive.stderr
    );
}

/// An agent binary that is a script whose interpreter the image lacks (a `claude`
/// installed by npm, run by node, say) is refused before the first move, by name, with
/// what to install — not reported as a proof that "printed no init line".
#[test]
fn an_agent_whose_interpreter_the_image_lacks_is_refused_naming_what_to_install() {
    let world = World::new();
    let bin = world.root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // The interpreter exists on the host (so the probe runs the script), not in the image.
    let interpreter = bin.join("stet-test-interpreter");
    stet_exec_support::write_executable(&interpreter, b"#!/bin/sh\nexec /bin/sh \"$@\"\n").unwrap();
    let claude = bin.join("claude");
    stet_exec_support::write_executable(
        &claude,
        format!(
            "#!{}\ncase \"$1 $2\" in\n  \"--version \"*) echo '2.1.332 (Claude Code)';;\n  \"auth status\") echo '{{\"loggedIn\":true,\"authMethod\":\"claude.ai\"}}';;\nesac\n",
            interpreter.display()
        )
        .as_bytes(),
    )
    .unwrap();
    let config = walled_claude_setup(
        &world,
        &claude.display().to_string(),
        "http://127.0.0.1:9",
        "",
    );
    world.repo_config(&config);
    let out = world.run_stet(&["walls", "--json"]);
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    let json = out.json();
    let launched = wall(&json, "proof-launched");
    assert_eq!(launched["state"], "cannot-run", "{json:#}");
    assert!(
        launched["detail"]
            .as_str()
            .unwrap()
            .contains("cannot run inside the image"),
        "{json:#}"
    );
    assert!(
        launched["remedy"]
            .as_str()
            .unwrap()
            .contains("install stet-test-interpreter in the image"),
        "{json:#}"
    );
}

#[test]
fn a_long_lived_token_beside_the_profile_is_a_login_the_sandbox_holds_only_a_stand_in_of() {
    use std::os::unix::fs::PermissionsExt;
    let c = claude_world(FakeApi::start(|request| {
        let command = if request.body.to_string().contains("This is a wall check") {
            "stet-wall-canary"
        } else {
            // The CLI keeps the token from its tools' environment; the agent digs it out.
            "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a OAUTH_TOKEN | sort -u; \
             ls -a \"$CLAUDE_CONFIG_DIR\"/.."
        };
        if request.tool_results().is_empty() {
            Reply::ToolUse {
                name: "Bash".into(),
                input: json!({"command": command, "description": "as asked"}),
            }
        } else {
            Reply::Text("finished".into())
        }
    }));
    // `claude setup-token` printed it; the person stored it beside the profile.
    std::fs::remove_file(c.profile.join(".credentials.json")).unwrap();
    let token_file = c.world.root.path().join("profiles/claude.oauth-token");
    std::fs::write(&token_file, format!("{}\n", stet_e2e::DUMMY_ACCESS_TOKEN)).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Readable by others: refused by name.
    let out = c.world.run_stet(&["walls", "--json"]);
    assert_ne!(out.code, 0);
    assert!(
        format!("{}{}", out.stdout, out.stderr).contains("chmod 600"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = c.world.run_stet(&["walls", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    let login = wall(&json, "login-present");
    assert!(
        login["detail"]
            .as_str()
            .unwrap()
            .starts_with("a long-lived token (claude setup-token) in"),
        "{login:#}"
    );
    assert_eq!(
        wall(&json, "credential-not-in-sandbox")["held"],
        true,
        "{json:#}"
    );
    // A call: the CLI sends its stand-in, the fake (which knows only the real one) answers.
    let out = c.world.run_stet(&["ask", "--json", "look around"]);
    let json = out.json();
    assert_eq!(out.code, 0, "{json:#}\n{}", out.stderr);
    let results: String = c
        .api
        .requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .map(|r| r.to_string())
        .collect();
    assert!(results.contains("CLAUDE_CODE_OAUTH_TOKEN="), "{results}");
    assert!(!results.contains(stet_e2e::DUMMY_ACCESS_TOKEN), "{results}");
    assert!(
        !results.contains("oauth-token"),
        "the token file is not mounted: {results}"
    );
}

#[test]
fn other_logins_kept_in_the_login_file_are_refused_before_any_launch() {
    let c = claude_world(asks_to_run("stet-wall-canary"));
    let file = c.profile.join(".credentials.json");
    let mut login: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    login["mcpOAuth"] = json!({"some-server": {"accessToken": "an-mcp-token-0123456789"}});
    std::fs::write(&file, login.to_string()).unwrap();
    let out = c.world.run_stet(&["walls", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 3, "{json:#}\n{}", out.stderr);
    let wall = wall(&json, "login-present");
    assert_eq!(wall["held"], false, "{wall:#}");
    assert_eq!(
        wall["detail"],
        "the profile's .credentials.json also holds mcpOAuth, whose tokens would enter the sandbox"
    );
    assert!(c.api.requests().is_empty(), "no launch was made");
}

/// A claude world whose stored login has expired, with `platform.claude.com:443` dialled at
/// an OAuth double answering `answer`, and the double's CA trusted by the CLI.
fn expired_login_world(answer: Answer) -> (Claude, OauthDouble, tempfile::TempDir) {
    let api = asks_to_run("stet-wall-canary");
    let world = World::new();
    let dir = tempfile::tempdir().unwrap();
    let double = OauthDouble::start(dir.path(), answer);
    let extra = format!(
        "extra_ca_certs = \"{}\"\n\n[network.connect_to]\n\"{}:443\" = \"{}\"\n",
        double.ca_pem.display(),
        stet_e2e::oauth_double::HOST,
        double.addr
    );
    let config = walled_claude_setup(
        &world,
        &claude_binary().display().to_string(),
        &api.url,
        &extra,
    );
    world.repo_config(&config);
    let profile = world.root.path().join("profiles/claude");
    let file = profile.join(".credentials.json");
    let mut login: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    login["claudeAiOauth"]["accessToken"] = json!(EXPIRED_ACCESS_TOKEN);
    login["claudeAiOauth"]["expiresAt"] = json!(1_000);
    std::fs::write(&file, login.to_string()).unwrap();
    (
        Claude {
            world,
            api,
            profile,
        },
        double,
        dir,
    )
}

const EXPIRED_ACCESS_TOKEN: &str = "sk-ant-oat01-dummy-expired-not-accepted-anywhere-22";
const RENEWED_REFRESH_TOKEN: &str = "sk-ant-ort01-dummy-renewed-by-the-double-only-3333";

fn stored_login(profile: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(profile.join(".credentials.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["claudeAiOauth"].clone()
}

#[test]
fn an_expired_login_is_renewed_by_the_real_cli_in_a_sandbox_of_its_own_before_the_call() {
    let (c, double, _dir) = expired_login_world(Answer::Renew {
        access_token: stet_e2e::DUMMY_ACCESS_TOKEN.into(),
        refresh_token: RENEWED_REFRESH_TOKEN.into(),
        expires_in: 8 * 3600,
    });
    let out = c.world.run_stet(&["walls", "--json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("claude: renewed the stored login"),
        "{}",
        out.stderr
    );
    // The real CLI asked the double once, with the stored refresh token, the way it asks
    // the real host.
    let asked = double.requests();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert_eq!(asked[0].path, "/v1/oauth/token");
    assert_eq!(asked[0].body["grant_type"], "refresh_token");
    assert_eq!(
        asked[0].body["refresh_token"],
        stet_e2e::DUMMY_REFRESH_TOKEN
    );
    // The renewed login is in the profile (its other fields kept), good for hours.
    let login = stored_login(&c.profile);
    assert_eq!(login["accessToken"], stet_e2e::DUMMY_ACCESS_TOKEN);
    assert_eq!(login["refreshToken"], RENEWED_REFRESH_TOKEN);
    assert_eq!(login["subscriptionType"], "max");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        login["expiresAt"].as_u64().unwrap() > now + 7 * 3600 * 1000,
        "{login:#}"
    );
    // The proof's call carried the renewed login to the model API, swapped in by the
    // gateway; the refresh's own request went to stet's stub, never to the model API (the
    // refresh holds no tools, every request the fake saw had the proof's).
    let requests = c.api.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        let auth = r.headers.iter().find(|(n, _)| n == "authorization");
        assert_eq!(
            auth.map(|(_, v)| v.as_str()),
            Some(format!("Bearer {}", stet_e2e::DUMMY_ACCESS_TOKEN).as_str())
        );
        assert!(
            r.body["tools"].as_array().is_some_and(|t| !t.is_empty()),
            "a request without tools reached the model API: {:#}",
            r.body
        );
    }
    // Fresh now: the next proof renews nothing.
    let again = c.world.run_stet(&["walls", "--json"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!again.stderr.contains("renew"), "{}", again.stderr);
    assert_eq!(double.requests().len(), 1);
}

/// The image and `stet.kind` of every container the engine made between `since` and
/// `until` (seconds since the epoch), as `docker events` reports them.
fn containers_made(since: u64, until: u64) -> Vec<(String, String)> {
    let out = std::process::Command::new("docker")
        .args([
            "events",
            "--since",
            &since.to_string(),
            "--until",
            &until.to_string(),
            "--filter",
            "type=container",
            "--filter",
            "event=create",
            "--format",
            "{{.Actor.Attributes.image}} {{index .Actor.Attributes \"stet.kind\"}}",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(image, kind)| (image.to_string(), kind.to_string()))
        .collect()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn a_trusted_repositorys_image_serves_its_sandboxes_but_never_the_logins_refresh() {
    let (c, _double, _dir) = expired_login_world(Answer::Renew {
        access_token: stet_e2e::DUMMY_ACCESS_TOKEN.into(),
        refresh_token: RENEWED_REFRESH_TOKEN.into(),
        expires_in: 8 * 3600,
    });
    // An image built from the repository's own recipe (whoever can commit wrote it), named
    // by its stet.toml, which the person trusts.
    let recipe = c.world.root.path().join("recipe");
    std::fs::create_dir_all(&recipe).unwrap();
    std::fs::write(
        recipe.join("Containerfile"),
        format!(
            "FROM {}\nRUN echo the-repositorys > /repository-image\n",
            stet_e2e::IMAGE
        ),
    )
    .unwrap();
    let built = std::process::Command::new("docker")
        .args(["build", "-q", "-t", "stet-repository-image:1", "-f"])
        .arg(recipe.join("Containerfile"))
        .arg(&recipe)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let config = std::fs::read_to_string(c.world.work.join("stet.toml"))
        .unwrap()
        .replace(
            &format!("image = \"{}\"", stet_e2e::IMAGE),
            "image = \"stet-repository-image:1\"",
        );
    c.world.repo_config(&config);
    let since = unix_now();
    let out = c.world.run_stet(&["walls", "--json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("claude: renewed the stored login"),
        "{}",
        out.stderr
    );
    // Other tests make containers meanwhile: only this test's image is told apart.
    let made = containers_made(since, unix_now() + 1);
    let ours = |kind: &str| {
        made.iter()
            .any(|(image, k)| k == kind && image == "stet-repository-image:1")
    };
    assert!(
        ours("proof"),
        "the proof ran in the repository's image: {made:?}"
    );
    assert!(
        !ours("refresh"),
        "the refresh (which holds the real login) ran in it: {made:?}"
    );
}

#[test]
fn a_renewal_the_oauth_host_refuses_stops_before_any_call_and_keeps_the_login() {
    let (c, double, _dir) = expired_login_world(Answer::Refuse {
        status: 400,
        error: "invalid_grant".into(),
    });
    let before = std::fs::read(c.profile.join(".credentials.json")).unwrap();
    let out = c.world.run_stet(&["walls", "--json"]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("did not renew its stored login"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("stet profile login"), "{}", out.stderr);
    assert_eq!(double.requests().len(), 1, "the CLI asked the double");
    assert_eq!(
        std::fs::read(c.profile.join(".credentials.json")).unwrap(),
        before,
        "the stored login is as it was"
    );
    assert!(c.api.requests().is_empty(), "no call was made");
}

#[test]
fn an_expired_login_without_a_refresh_token_is_named_before_any_call() {
    let c = claude_world(asks_to_run("stet-wall-canary"));
    let file = c.profile.join(".credentials.json");
    let mut login: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    login["claudeAiOauth"]["expiresAt"] = json!(1_000);
    login["claudeAiOauth"]["refreshToken"] = json!("");
    std::fs::write(&file, login.to_string()).unwrap();
    let out = c.world.run_stet(&["walls", "--json"]);
    let json = out.json();
    assert_eq!(out.code, 3, "{json:#}\n{}", out.stderr);
    let wall = wall(&json, "login-present");
    assert_eq!(wall["held"], false, "{wall:#}");
    assert_eq!(
        wall["detail"],
        "the stored login has expired and holds no refresh token to renew it with"
    );
    assert!(
        wall["remedy"]
            .as_str()
            .unwrap()
            .contains("stet profile login"),
        "{wall:#}"
    );
    assert!(c.api.requests().is_empty(), "no call was made");
}
