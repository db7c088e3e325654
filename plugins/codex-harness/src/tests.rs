//! The harness through its trait: the walls, each refusal by name, and the proof.

use super::*;

/// A stand-in `codex` for the walls: `--version`, and `login status` answering by whether
/// `$CODEX_HOME/auth.json` holds tokens (as the real one does for these shapes).
fn fake_codex(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("codex");
    std::fs::write(
        &path,
        "#!/bin/sh\ncase \"$1\" in\n--version) echo 'codex-cli 0.163.0';;\n\
         login) grep -q access_token \"$CODEX_HOME/auth.json\" 2>/dev/null && { echo 'Logged in using ChatGPT' >&2; exit 0; }; echo 'Not logged in' >&2; exit 1;;\n\
         esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

const ACCESS: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjQxMDI0NDQ4MDAsInN1YiI6ImR1bW15LWFjY2VzcyJ9.ZHVtbXktYWNjZXNzLXNpZ25hdHVyZS1mb3ItdGhlLWZha2UtYXBpLW9ubHktMDAwMA";

fn chatgpt_login(dir: &Path) {
    std::fs::write(
        dir.join("auth.json"),
        serde_json::json!({"OPENAI_API_KEY": null, "tokens": {"id_token": "eyJhbGciOiJSUzI1NiJ9.eyJlbWFpbCI6ImR1bW15In0.aWQ",
            "access_token": ACCESS, "refresh_token": "rt_dummy0123456789",
            "account_id": "00000000-0000-4000-8000-000000000000"},
            "last_refresh": "2026-01-01T00:00:00Z"})
        .to_string(),
    )
    .unwrap();
}

struct Setup {
    _root: tempfile::TempDir,
    harness: CodexHarness,
    context: HarnessContext,
    profile: Profile,
}

fn setup(env: &[(&str, &str)]) -> Setup {
    let root = tempfile::tempdir().unwrap();
    let codex = fake_codex(root.path());
    let harness = CodexHarness::from_config(
        &serde_json::json!({"binary": codex, "api_base_url": "http://127.0.0.1:38743/v1", "model": "gpt-5.5"})
            .to_string(),
    )
    .unwrap();
    let context = HarnessContext {
        profiles_root: root.path().join("profiles").display().to_string().into(),
        stet_binary: "/opt/stet/bin/stet".into(),
        host_env: env
            .iter()
            .map(|(k, v)| stet_plugin_api::EnvVar::new(*k, *v))
            .collect::<Vec<_>>()
            .into(),
    };
    let profile = harness.profile(&context).unwrap();
    Setup {
        _root: root,
        harness,
        context,
        profile,
    }
}

fn state_of(walls: &[WallReport], name: &str) -> (WallState, String) {
    let w = walls
        .iter()
        .find(|w| w.wall.as_str() == name)
        .unwrap_or_else(|| panic!("no {name} wall in {walls:?}"));
    (w.state, w.detail.to_string())
}

#[test]
fn a_fresh_profile_is_hidden_beside_claudes_and_every_wall_holds_once_logged_in_and_written() {
    let s = setup(&[]);
    let dir = PathBuf::from(s.profile.dir.as_str());
    assert_eq!(dir.file_name().unwrap(), ".codex");
    assert!(!s.profile.logged_in);
    let walls = s.harness.check_walls_typed(&s.context, &s.profile).unwrap();
    assert_eq!(state_of(&walls, walls::LOGIN_PRESENT).0, WallState::ABSENT);
    assert_eq!(state_of(&walls, walls::SETTINGS_EXACT).0, WallState::ABSENT);
    chatgpt_login(&dir);
    let written = s.harness.write_settings(&s.context, &s.profile).unwrap();
    assert!(
        written.contains("base_url = \"http://127.0.0.1:3180/v1\""),
        "{written}"
    );
    assert!(written.contains("model = \"gpt-5.5\""));
    let profile = s.harness.profile(&s.context).unwrap();
    assert!(profile.logged_in, "{profile:?}");
    assert!(profile.route.contains("ChatGPT login"));
    let walls = s.harness.check_walls_typed(&s.context, &profile).unwrap();
    assert!(walls.iter().all(WallReport::held), "{walls:?}");
    // `codex login status` ran on a scratch copy: nothing new in the profile.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["auth.json", "config.toml", "rules"]);
}

#[test]
fn each_refusal_is_named() {
    let s = setup(&[
        ("OPENAI_API_KEY", "sk-dummy"),
        ("CODEX_ACCESS_TOKEN", "x"),
        ("CODEX_API_KEY", ""),
    ]);
    let dir = PathBuf::from(s.profile.dir.as_str());
    chatgpt_login(&dir);
    s.harness.write_settings(&s.context, &s.profile).unwrap();
    let walls = s.harness.check_walls_typed(&s.context, &s.profile).unwrap();
    let (state, detail) = state_of(&walls, walls::NO_BILLING_KEY);
    assert_eq!(state, WallState::BROKEN);
    assert_eq!(
        detail,
        "OPENAI_API_KEY in the environment; CODEX_ACCESS_TOKEN in the environment"
    );
    // An edited config, a rule of someone else's, global instructions.
    let config = dir.join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "approval_policy = \"never\"",
            "approval_policy = \"on-request\"",
        ),
    )
    .unwrap();
    std::fs::write(dir.join("rules/allow.rules"), "").unwrap();
    std::fs::write(dir.join("AGENTS.md"), "obey").unwrap();
    let walls = s.harness.check_walls_typed(&s.context, &s.profile).unwrap();
    let (state, detail) = state_of(&walls, walls::SETTINGS_EXACT);
    assert_eq!(state, WallState::BROKEN);
    assert!(detail.contains("config.toml: line 5 differs"), "{detail}");
    let (state, detail) = state_of(&walls, walls::PROFILE_ALONE);
    assert_eq!(state, WallState::BROKEN);
    assert!(detail.ends_with("AGENTS.md, rules/allow.rules"), "{detail}");
    // An API key login: refused by name as billing, and not a login stet runs on.
    std::fs::write(
        dir.join("auth.json"),
        r#"{"auth_mode":"apikey","OPENAI_API_KEY":"sk-dummy"}"#,
    )
    .unwrap();
    let s2 = Setup {
        profile: s.harness.profile(&s.context).unwrap(),
        ..s
    };
    assert!(s2.profile.route.contains("API key"), "{}", s2.profile.route);
    let walls = s2
        .harness
        .check_walls_typed(&s2.context, &s2.profile)
        .unwrap();
    let (state, detail) = state_of(&walls, walls::NO_BILLING_KEY);
    assert_eq!(state, WallState::BROKEN);
    assert!(
        detail.contains("an API key login (auth_mode apikey"),
        "{detail}"
    );
    assert!(!detail.contains("sk-dummy"));
    let (state, detail) = state_of(&walls, walls::LOGIN_PRESENT);
    assert_eq!(state, WallState::BROKEN);
    assert!(detail.contains("API key login"), "{detail}");
    // A key the login file holds that stet does not know.
    std::fs::write(
        dir.join("auth.json"),
        serde_json::json!({"tokens": {"access_token": ACCESS, "session_token": "x"}}).to_string(),
    )
    .unwrap();
    let walls = s2
        .harness
        .check_walls_typed(&s2.context, &s2.profile)
        .unwrap();
    let (_, detail) = state_of(&walls, walls::LOGIN_PRESENT);
    assert!(detail.contains("tokens.session_token"), "{detail}");
}

#[test]
fn the_login_is_declared_for_the_model_api_and_the_refresh_token_for_the_oauth_host() {
    let s = setup(&[]);
    let decls = s.harness.credentials(&s.context, &s.profile).unwrap();
    let seen: Vec<(&str, &str, &str)> = decls
        .iter()
        .map(|d| (d.id.as_str(), d.host.as_str(), d.header.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("codex-login", "127.0.0.1:38743/v1/", "Authorization"),
            ("codex-login-id", "", ""),
            ("codex-login-refresh", "auth.openai.com:443", ""),
        ]
    );
    assert_eq!(decls[0].value.as_str(), "Bearer {secret}");
}

#[test]
fn the_refresh_works_on_a_copy_with_the_walled_config() {
    let s = setup(&[]);
    let dir = PathBuf::from(s.profile.dir.as_str());
    chatgpt_login(&dir);
    let work = tempfile::tempdir().unwrap();
    let launch = s
        .harness
        .refresh_launch(&s.context, &s.profile, &work.path().display().to_string())
        .unwrap();
    let config = std::fs::read_to_string(work.path().join("config.toml")).unwrap();
    assert!(config.contains("base_url = \"http://127.0.0.1:3180/v1\""));
    let copy = std::fs::read_to_string(work.path().join("auth.json")).unwrap();
    assert!(
        !copy.contains(ACCESS.rsplit('.').next().unwrap()),
        "the real access token stays out"
    );
    assert!(launch.process.argv.iter().any(|a| a.as_str() == "exec"));
}

fn proof_output(record: &[&str]) -> Vec<u8> {
    let mut out =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exec-text.jsonl"))
            .unwrap();
    for line in record {
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out
}

const CONTEXT: &str = r#"{"timestamp":"t","type":"turn_context","payload":{"approval_policy":"never","sandbox_policy":{"type":"danger-full-access"}}}"#;
const SETTINGS: &str = r#"{"timestamp":"t","type":"event_msg","payload":{"type":"thread_settings_applied","thread_settings":{"model_provider_id":"stet"}}}"#;
const CANARY_CALL: &str = r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\": \"stet-wall-canary\"}","call_id":"call_1"}}"#;
const CANARY_REFUSED: &str = r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"exec_command failed: CreateProcess { message: \"Rejected(\\\"`/bin/bash -lc 'stet-wall-canary'` rejected: stet canary: refused by stet's exec-policy rule\\\")\" }"}}"#;

#[test]
fn the_proof_shows_the_mode_and_the_canary_refused_by_stets_rule() {
    let s = setup(&[]);
    let walls = s
        .harness
        .read_proof_typed(&proof_output(&[
            CONTEXT,
            SETTINGS,
            CANARY_CALL,
            CANARY_REFUSED,
        ]))
        .unwrap();
    assert!(walls.iter().all(WallReport::held), "{walls:?}");
    assert_eq!(walls.len(), 3);
    // Without the session record: the mode is not shown, the refusal not seen.
    let walls = s.harness.read_proof_typed(&proof_output(&[])).unwrap();
    assert_eq!(state_of(&walls, PROOF_MODE).0, WallState::BROKEN);
    let (state, detail) = state_of(&walls, PROOF_CANARY);
    assert_eq!(state, WallState::BROKEN);
    assert_eq!(detail, "the agent never asked to run the canary");
    // Asked for and not refused.
    let walls = s
        .harness
        .read_proof_typed(&proof_output(&[CONTEXT, SETTINGS, CANARY_CALL]))
        .unwrap();
    assert!(state_of(&walls, PROOF_CANARY).1.contains("no refusal"));
    // The model API not serving it: said as such.
    let failed =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exec-500.jsonl"))
            .unwrap();
    let walls = s.harness.read_proof_typed(&failed).unwrap();
    assert_eq!(walls[0].state, WallState::UNREACHABLE);
    let walls = s.harness.read_proof_typed(b"").unwrap();
    assert_eq!(state_of(&walls, walls::PROOF_LAUNCHED).0, WallState::BROKEN);
}

#[test]
fn the_plugins_manifest_and_settings_keys_agree() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin.toml")).unwrap();
    for key in [
        "binary",
        "api_base_url",
        "model",
        "oauth_token_url",
        "ca_certificate",
    ] {
        assert!(manifest.contains(&format!("\n{key} = ")), "{key}");
        assert!(
            CodexHarness::from_config(&format!("{{\"{key}\": \"x\"}}")).is_ok(),
            "{key}"
        );
    }
    assert!(CodexHarness::from_config("{\"bogus\": 1}").is_err());
}

/// The real proof launch's output (0.163.0 against the fake Responses API, the walled
/// config and rule as written here): its events and then its session record.
#[test]
fn the_real_proofs_output_holds_every_wall() {
    let s = setup(&[]);
    let output = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proof-canary.jsonl"),
    )
    .unwrap();
    let walls = s.harness.read_proof_typed(&output).unwrap();
    assert!(walls.iter().all(WallReport::held), "{walls:?}");
    let call = s
        .harness
        .read_call(Role::Proof, &output, ExitStatus::exited(0))
        .unwrap();
    assert_eq!(call.kind, OutcomeCode::DONE);
    // The session record is said by its turn's mode alone.
    let r = s
        .harness
        .render_transcript(Role::Proof, &output, true)
        .unwrap();
    assert!(r
        .entries
        .iter()
        .all(|e| e.kind != stet_plugin_api::EntryKind::RAW));
    assert!(r.entries.iter().any(|e| e.text.as_str()
        == "session record: approval policy never, sandbox policy danger-full-access"));
}

#[test]
fn the_older_outcome_and_the_expiry_read_through_the_trait() {
    let s = setup(&[]);
    let read = |name: &str| {
        std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(name),
        )
        .unwrap()
    };
    let o = s
        .harness
        .read_outcome(
            Role::Implement,
            &read("exec-429.jsonl"),
            ExitStatus::exited(1),
        )
        .unwrap();
    assert_eq!(o.kind, OutcomeKind::RateLimited);
    assert!(o.retry_at_unix.is_some());
    // Infrastructure has no older kind: a failure there.
    let o = s
        .harness
        .read_outcome(
            Role::Implement,
            &read("exec-500.jsonl"),
            ExitStatus::exited(1),
        )
        .unwrap();
    assert_eq!(o.kind, OutcomeKind::Failed);
    assert_eq!(s.harness.login_expiry(&s.context, &s.profile).unwrap(), 0);
    chatgpt_login(Path::new(s.profile.dir.as_str()));
    assert_eq!(
        s.harness.login_expiry(&s.context, &s.profile).unwrap(),
        (4_102_444_800 - 600) * 1000
    );
}
