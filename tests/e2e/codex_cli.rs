//! The fake Responses API (`stet_e2e::fake_responses`) against the real Codex CLI 0.163.0,
//! with no stet in between: `codex exec` run with the Codex harness's own arguments on a
//! `CODEX_HOME` holding the harness's own walled `config.toml` and rules (its provider at the
//! fake, the ChatGPT login route), a dummy login made for the fake only. What these show is
//! that the fake speaks the Responses API as the pinned CLI does — text, the shell tool and
//! its output, apply_patch, a usage limit, an error, a login renewed at its token endpoint —
//! under the config stet really writes, so that the tests through stet can lean on it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use stet_e2e::fake_responses::{
    FakeResponses, Reply, CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, REFRESHED_ACCESS_TOKEN,
    REFRESHED_REFRESH_TOKEN,
};
use stet_e2e::{codex_binary, dummy_codex_login, Output};

/// The model the walled config names.
const MODEL: &str = "gpt-5.5";

/// A scratch place for one run: a `CODEX_HOME` (`home/.codex`) and a lane (a git
/// repository). Made under the cargo target directory, never under /tmp: codex refuses to
/// put its helper binaries under a temporary directory.
struct Codex {
    root: tempfile::TempDir,
    lane: PathBuf,
}

impl Codex {
    /// A `CODEX_HOME` holding the dummy login and a config that points a custom provider
    /// at `api`, and an empty lane.
    fn new(api: &FakeResponses) -> Codex {
        let root = tempfile::Builder::new()
            .prefix("codex-cli-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let lane = root.path().join("lane");
        std::fs::create_dir_all(&lane).unwrap();
        stet_e2e::git(&lane, &["init", "--quiet"]);
        std::fs::write(lane.join("README"), "a lane\n").unwrap();
        stet_e2e::git(&lane, &["add", "README"]);
        stet_e2e::git(&lane, &["commit", "--quiet", "-m", "start"]);
        let codex = Codex { root, lane };
        dummy_codex_login(&codex.home());
        let home = codex.codex_home();
        std::fs::write(
            home.join(stet_plugin_codex::walled::CONFIG_FILE),
            stet_plugin_codex::walled::config(&api.base_url(), Some(MODEL)),
        )
        .unwrap();
        let (rules, text) = stet_plugin_codex::walled::rules();
        std::fs::create_dir_all(home.join(&rules).parent().unwrap()).unwrap();
        std::fs::write(home.join(rules), text).unwrap();
        codex
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn codex_home(&self) -> PathBuf {
        self.home().join(".codex")
    }

    /// `codex exec` as the harness runs it, in the lane with `prompt` on stdin, from an
    /// environment made from scratch (the token endpoint the fake's), killed after two
    /// minutes.
    fn exec(&self, api: &FakeResponses, prompt: &str) -> Run {
        use std::io::Write;
        let mut child = Command::new("timeout")
            .arg("120")
            .arg(codex_binary())
            .args(stet_plugin_codex::walled::exec_args(
                &self.lane.display().to_string(),
            ))
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.home())
            .env("CODEX_HOME", self.codex_home())
            .env("CODEX_REFRESH_TOKEN_URL_OVERRIDE", api.token_url())
            .current_dir(&self.lane)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run codex");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(prompt.as_bytes())
            .unwrap();
        let out = Output::finish(child);
        let events = out
            .stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not a JSON event ({e}): {line}\n{}", out.stderr))
            })
            .collect();
        Run { out, events }
    }

    fn auth(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.codex_home().join("auth.json")).unwrap())
            .unwrap()
    }
}

/// What one `codex exec --json` did: its output and its events.
struct Run {
    out: Output,
    events: Vec<Value>,
}

impl Run {
    /// The items of the completed-item events, of `kind`.
    fn items(&self, kind: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == kind)
            .map(|e| &e["item"])
            .collect()
    }

    /// The one event of `kind`.
    fn event(&self, kind: &str) -> &Value {
        let found: Vec<&Value> = self.events.iter().filter(|e| e["type"] == kind).collect();
        assert_eq!(found.len(), 1, "one {kind} event: {self}");
        found[0]
    }

    fn usage(&self) -> [u64; 3] {
        let usage = &self.event("turn.completed")["usage"];
        [
            usage["input_tokens"].as_u64().unwrap(),
            usage["cached_input_tokens"].as_u64().unwrap(),
            usage["output_tokens"].as_u64().unwrap(),
        ]
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.out.code, self.out.stdout, self.out.stderr
        )
    }
}

/// A fake that answers each model call with the next of `replies`, then with text.
fn scripted(replies: Vec<Reply>) -> FakeResponses {
    let replies = std::sync::Mutex::new(replies.into_iter());
    FakeResponses::start(move |_| {
        replies
            .lock()
            .unwrap()
            .next()
            .unwrap_or_else(|| Reply::Text("finished".into()))
    })
}

/// What every model call carries: the dummy login's access token and account, the prompt.
fn assert_calls_carry_the_login(api: &FakeResponses, token: &str, prompt: &str) {
    let calls = api.requests();
    assert!(!calls.is_empty(), "no model call");
    for call in &calls {
        assert_eq!(call.path, "/v1/responses");
        assert_eq!(
            call.header("authorization"),
            Some(format!("Bearer {token}").as_str())
        );
        assert_eq!(
            call.header("chatgpt-account-id"),
            Some("00000000-0000-4000-8000-000000000000")
        );
        assert_eq!(call.header("accept"), Some("text/event-stream"));
        assert_eq!(call.body["stream"], true);
        assert_eq!(call.body["model"], MODEL);
        assert!(
            call.user_texts().iter().any(|t| t.contains(prompt)),
            "{:?}",
            call.user_texts()
        );
    }
}

#[test]
fn codex_exec_streams_the_fakes_text_reply_and_reports_its_usage() {
    let api = scripted(vec![Reply::Text(
        "Hello from the fake Responses API.".into(),
    )]);
    let codex = Codex::new(&api);
    let run = codex.exec(&api, "say hello");
    assert_eq!(run.out.code, 0, "{run}");
    let messages = run.items("agent_message");
    assert_eq!(messages.len(), 1, "{run}");
    assert_eq!(messages[0]["text"], "Hello from the fake Responses API.");
    assert!(run.items("error").is_empty(), "no warning: {run}");
    assert_eq!(
        run.usage(),
        [INPUT_TOKENS, CACHED_TOKENS, OUTPUT_TOKENS],
        "{run}"
    );
    assert_eq!(api.requests().len(), 1);
    assert_calls_carry_the_login(&api, stet_e2e::DUMMY_CODEX_ACCESS_TOKEN, "say hello");
    // The models list is asked for, with the login, before the turn.
    let models: Vec<_> = api
        .all_requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .collect();
    assert!(!models.is_empty(), "no models request");
    for request in models {
        assert!(request.path.starts_with("/v1/models?"), "{}", request.path);
    }
    // The offered tools are the ones the tests through stet script.
    let tools = api.requests()[0].tool_names();
    for tool in ["exec_command", "apply_patch"] {
        assert!(tools.iter().any(|t| t == tool), "{tools:?}");
    }
    // No refresh: the dummy access token expires in 2100.
    assert!(api.token_requests().is_empty());
}

#[test]
fn codex_exec_runs_the_fakes_exec_command_call_and_sends_its_output_back() {
    let api = scripted(vec![
        Reply::Exec("echo hello > out.txt && echo made-it".into()),
        Reply::Text("done".into()),
    ]);
    let codex = Codex::new(&api);
    let run = codex.exec(&api, "make out.txt");
    assert_eq!(run.out.code, 0, "{run}");
    assert_eq!(
        std::fs::read_to_string(codex.lane.join("out.txt")).unwrap(),
        "hello\n"
    );
    let commands = run.items("command_execution");
    assert_eq!(commands.len(), 1, "{run}");
    assert_eq!(
        commands[0]["command"],
        "/bin/bash -lc 'echo hello > out.txt && echo made-it'"
    );
    assert_eq!(commands[0]["exit_code"], 0);
    assert_eq!(commands[0]["status"], "completed");
    assert_eq!(run.items("agent_message")[0]["text"], "done");
    // Two model calls: the second carries the call and its output, by the call's id.
    let calls = api.requests();
    assert_eq!(calls.len(), 2, "{run}");
    assert!(calls[0].tool_outputs().is_empty());
    let outputs = calls[1].tool_outputs();
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert_eq!(outputs[0]["type"], "function_call_output");
    let call = calls[1].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .expect("the call re-sent")
        .clone();
    assert_eq!(call["name"], "exec_command");
    assert_eq!(outputs[0]["call_id"], call["call_id"]);
    let text = &calls[1].tool_output_texts()[0];
    assert!(
        text.contains("Process exited with code 0") && text.contains("made-it"),
        "{text}"
    );
    // The turn's usage is the sum of its calls'.
    assert_eq!(
        run.usage(),
        [2 * INPUT_TOKENS, 2 * CACHED_TOKENS, 2 * OUTPUT_TOKENS]
    );
    assert_calls_carry_the_login(&api, stet_e2e::DUMMY_CODEX_ACCESS_TOKEN, "make out.txt");
}

#[test]
fn codex_exec_applies_the_fakes_apply_patch_call() {
    let api = scripted(vec![
        Reply::Patch(
            "*** Begin Patch\n*** Add File: hello.txt\n+hello from apply_patch\n*** End Patch\n"
                .into(),
        ),
        Reply::Text("patched".into()),
    ]);
    let codex = Codex::new(&api);
    let run = codex.exec(&api, "add hello.txt");
    assert_eq!(run.out.code, 0, "{run}");
    assert_eq!(
        std::fs::read_to_string(codex.lane.join("hello.txt")).unwrap(),
        "hello from apply_patch\n"
    );
    let changes = run.items("file_change");
    assert_eq!(changes.len(), 1, "{run}");
    assert_eq!(changes[0]["changes"][0]["kind"], "add");
    let outputs = api.requests()[1].tool_outputs();
    assert_eq!(outputs[0]["type"], "custom_tool_call_output", "{outputs:?}");
    assert!(
        api.tool_output_text().contains("A hello.txt"),
        "{}",
        api.tool_output_text()
    );
}

#[test]
fn codex_exec_fails_the_turn_at_once_on_the_fakes_usage_limit() {
    let api = scripted(vec![Reply::usage_limit(3600)]);
    let codex = Codex::new(&api);
    let run = codex.exec(&api, "do something");
    assert_eq!(run.out.code, 1, "{run}");
    let failed = run.event("turn.failed");
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("You\u{2019}ve hit your usage limit") && message.contains("try again at"),
        "{run}"
    );
    // Not retried: one model call.
    assert_eq!(api.requests().len(), 1, "{run}");
    assert!(run.items("agent_message").is_empty());
}

#[test]
fn codex_exec_fails_the_turn_on_the_fakes_server_error_after_the_retries_the_walled_config_bounds()
{
    let api = FakeResponses::start(|_| Reply::server_error("the fake is down"));
    let codex = Codex::new(&api);
    let run = codex.exec(&api, "do something");
    assert_eq!(run.out.code, 1, "{run}");
    run.event("turn.failed");
    // `request_max_retries = 2` and `stream_max_retries = 2`: three tries of the stream,
    // each of three requests (measured with 0.163.0), then the turn fails; never for ever.
    assert_eq!(api.requests().len(), 9, "{run}");
}

#[test]
fn codex_refused_by_the_fake_without_the_dummy_login_fails_the_turn() {
    let api = scripted(vec![Reply::Text("never".into())]);
    let codex = Codex::new(&api);
    // A login the fake never issued: its access token is refused (401).
    let auth_path = codex.codex_home().join("auth.json");
    let text = std::fs::read_to_string(&auth_path)
        .unwrap()
        .replace("ZHVtbXktYWNjZXNz", "b3RoZXItYWNjZXNz");
    std::fs::write(&auth_path, text).unwrap();
    let run = codex.exec(&api, "do something");
    assert_eq!(run.out.code, 1, "{run}");
    run.event("turn.failed");
    assert!(run.items("agent_message").is_empty(), "{run}");
    let calls = api.requests();
    assert!(!calls.is_empty(), "the call reached the fake: {run}");
    for call in calls {
        let auth = call.header("authorization").unwrap_or_default();
        assert!(auth.contains("b3RoZXItYWNjZXNz"), "{auth}");
    }
}

#[test]
fn codex_renews_a_login_about_to_expire_at_the_fakes_token_endpoint() {
    let api = scripted(vec![Reply::Text("renewed".into())]);
    let codex = Codex::new(&api);
    // The access token expires in a minute: codex renews it before the turn.
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 60;
    let mut auth = codex.auth();
    auth["tokens"]["access_token"] = Value::String(stet_e2e::dummy_jwt(
        &serde_json::json!({"exp": soon, "sub": "dummy-soon"}),
    ));
    std::fs::write(codex.codex_home().join("auth.json"), auth.to_string()).unwrap();
    let run = codex.exec(&api, "after a refresh");
    assert_eq!(run.out.code, 0, "{run}");
    let refreshes = api.token_requests();
    assert_eq!(refreshes.len(), 1, "{run}");
    assert_eq!(refreshes[0].path, "/oauth/token");
    assert_eq!(refreshes[0].body["grant_type"], "refresh_token");
    assert_eq!(
        refreshes[0].body["refresh_token"],
        stet_e2e::DUMMY_CODEX_REFRESH_TOKEN
    );
    assert_eq!(refreshes[0].header("authorization"), None);
    // The model calls carry the renewed token, and codex kept the renewed login.
    assert_calls_carry_the_login(&api, REFRESHED_ACCESS_TOKEN, "after a refresh");
    let auth = codex.auth();
    assert_eq!(auth["tokens"]["access_token"], REFRESHED_ACCESS_TOKEN);
    assert_eq!(auth["tokens"]["refresh_token"], REFRESHED_REFRESH_TOKEN);
    assert_eq!(
        auth["tokens"]["account_id"],
        "00000000-0000-4000-8000-000000000000"
    );
    assert_eq!(run.items("agent_message")[0]["text"], "renewed");
}

/// The fake is the only thing codex reached: nothing under the lane but what the model
/// asked for, and the run left its state under `CODEX_HOME` alone.
#[test]
fn codex_exec_against_the_fake_writes_nothing_but_the_lane_and_its_home() {
    let api = scripted(vec![Reply::Exec("echo x > x.txt".into())]);
    let codex = Codex::new(&api);
    let run = codex.exec(&api, "write x");
    assert_eq!(run.out.code, 0, "{run}");
    let mut top: Vec<String> = std::fs::read_dir(codex.root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["home", "lane"]);
    let home: Vec<String> = std::fs::read_dir(codex.home())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(home, [".codex"], "codex wrote only under CODEX_HOME");
    assert!(Path::new(&codex.lane.join("x.txt")).is_file());
}
