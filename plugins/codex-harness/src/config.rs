//! The walled configuration: `<CODEX_HOME>/config.toml` and `<CODEX_HOME>/rules/stet.rules`,
//! written by stet, exactly, and checked against that text before every stage.
//!
//! Every key passed `codex exec --strict-config` with Codex CLI 0.163.0 (an unknown key
//! fails the launch: the launch always passes `--strict-config`). Why each is there:
//!
//! - `model_provider = "stet"`, `[model_providers.stet]`: a provider of stet's own whose
//!   `base_url` is the host's gateway on the sandbox's loopback (plain HTTP: the built-in
//!   `openai` provider tries WebSockets first and ignores `OPENAI_BASE_URL`);
//!   `requires_openai_auth = true` sends the login's access token (`auth.json`, a stand-in
//!   in there) as `Authorization: Bearer`, with `chatgpt-account-id`.
//! - `approval_policy = "never"`: `codex exec` never asks; nothing could answer.
//! - `sandbox_mode = "danger-full-access"`: Codex's own sandbox (bubblewrap and seccomp)
//!   cannot make its namespaces under Docker's default seccomp profile, so every command
//!   would fail there (measured). stet's sandbox is the wall; Codex's is not used.
//! - history, analytics, feedback, OpenTelemetry, the update check and web search off; the
//!   `apps`, `plugins`, `memories`, `multi_agent`, `goals`, `shell_snapshot` features off
//!   (with `apps` on a ChatGPT login dials chatgpt.com's MCP endpoint);
//!   `unbounded_connection_retries = false` and bounded request and stream retries, so an
//!   unreachable model API ends the call instead of retrying for ever.
//! - `cli_auth_credentials_store = "file"`: the login stays in `auth.json`, where the host
//!   seals it, never in a keyring.
//!
//! **What Codex reads from the lane** (the agent's working directory: whatever the last
//! agent left there), each measured with 0.163.0 on a lane holding all of them:
//!
//! - `AGENTS.md`, `AGENTS.override.md` (from the project root down to the working
//!   directory) and the fallback names: `project_doc_max_bytes = 0` reads none;
//!   `project_doc_fallback_filenames = []` names none (its default, said here).
//! - `.codex/config.toml` (instructions, `developer_instructions`, MCP servers, `notify`,
//!   project-doc settings, hooks), `.codex/rules/*.rules`, and the project's hooks: kept out
//!   by the launch's `-c projects={"<lane>"={trust_level="untrusted"}}` (the lane's path is
//!   known per call, not here; trusted, the same lane's config and rules are loaded and
//!   its MCP server started: measured). With that entry Codex also leaves this file alone
//!   (without one it appends an auto-trust entry for the lane, in the call's copy, which is
//!   then deleted).
//! - Skills: `.codex/skills/**/SKILL.md` (the untrusted project's layer all the same) and
//!   `.agents/skills/**/SKILL.md`. 0.163.0 has no key that stops it loading them: `[skills]
//!   include_instructions = false` keeps their names, descriptions and paths out of the
//!   developer message (where an implementer's skill reached the reviewer), and
//!   `[skills.bundled] enabled = false` drops Codex's own bundled skills. **What does not
//!   hold**: a `$name` or `[$name](…/SKILL.md)` in the prompt still makes Codex add that
//!   lane skill's `SKILL.md` to the turn as a user message (the prompt is stet's: the
//!   item's words, a check's output, an unreadable review's words). `[[skills.config]]`
//!   turns skills off only by exact path or name, which the lane chooses.
//! - Hooks: `[features] hooks = false`, so no hook runs, from anywhere, even if a trust
//!   step were bypassed (measured: a `$CODEX_HOME/hooks.json` runs under
//!   `--dangerously-bypass-hook-trust`, not with the feature off).
//!   `skill_mcp_dependency_install = false`: a skill's declared MCP servers are never
//!   installed.
//! - Not read at all by 0.163.0 from the lane (measured): `.env` (Codex loads only
//!   `$CODEX_HOME/.env`), `.codex/prompts` (slash commands of the interactive CLI),
//!   `.codex/agents/*.toml`, `.agents/plugins/marketplace.json`, `CLAUDE.md`, skills under
//!   any other directory.
//!
//! **Codex's side calls.** Besides the model API (`GET {base_url}/models`, `POST
//! {base_url}/responses`, both through the gateway) 0.163.0 asks ChatGPT's backend
//! (`chatgpt_base_url`, `https://chatgpt.com/backend-api/` by default) for
//! `/wham/accounts/check` (twice) and `/wham/settings/user` on every call, with the login's
//! access token (measured: no feature or key turns them off). `chatgpt_base_url` points
//! them at port 0 of the sandbox's own loopback ([`NO_BACKEND`]), where nothing can listen:
//! they fail at connect, before a byte is sent, so no stand-in leaves and no receipt counts
//! a refused host. Codex goes on without their answers (a commit trailer it would add).
//! **What does not hold**: a Business, Enterprise or Edu login (plan `business`,
//! `enterprise`, `enterprise_cbp_usage_based`, `edu`; measured: `team`, `plus`, `pro`,
//! `free` run) makes 0.163.0 also fetch its workspace's managed policies
//! (`/wham/config/bundle`), without which it refuses to start ("Failed to load cloud
//! config bundle (workspace-managed policies)", on its standard error: the proof sees only
//! that Codex did not start). stet does not fetch them (the login would go to a second
//! ChatGPT endpoint, whose answer the agent could ask for too), so such a login does not
//! run under stet.
//!
//! The rules file is Codex's exec policy (Starlark): the wall proof's canary, `forbidden`,
//! which Codex refuses before it runs anything, in every sandbox mode (measured).

use stet_plugin_api::WALL_CANARY;

/// The configuration file in CODEX_HOME.
pub const FILE: &str = "config.toml";

/// The directory of exec-policy rules in CODEX_HOME, and stet's file in it.
pub const RULES_DIR: &str = "rules";
/// stet's rule file.
pub const RULES_FILE: &str = "stet.rules";

/// The provider id the config names, which the proof finds in Codex's session record.
pub const PROVIDER: &str = "stet";

/// Where Codex's ChatGPT-backend side calls go (`chatgpt_base_url`): port 0 of the
/// sandbox's own loopback, which no process can listen on (and `NO_PROXY` keeps loopback
/// off the proxy), so each fails at connect and nothing is sent.
pub const NO_BACKEND: &str = "http://127.0.0.1:0/";

/// What the canary's refusal says: stet's own words, which Codex repeats in the refusal the
/// model sees (`` `<command>` rejected: <justification> ``).
pub const CANARY_JUSTIFICATION: &str = "stet canary: refused by stet's exec-policy rule";

/// What the configuration depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walled<'a> {
    /// The provider's base URL as the sandbox reaches it (the gateway).
    pub base_url: &'a str,
    /// The model, when the person named one.
    pub model: Option<&'a str>,
}

/// The exact text of `config.toml`.
pub fn text(walled: &Walled<'_>) -> String {
    let mut out = String::from(
        "# Written by stet: the walled configuration of the Codex harness. stet rewrites it\n\
         # at the start of each drive and stops a drive when it differs; do not edit it.\n",
    );
    out.push_str(&format!("model_provider = {}\n", quote(PROVIDER)));
    if let Some(model) = walled.model {
        out.push_str(&format!("model = {}\n", quote(model)));
    }
    out.push_str(
        "approval_policy = \"never\"\n\
         sandbox_mode = \"danger-full-access\"\n\
         check_for_update_on_startup = false\n\
         project_doc_max_bytes = 0\n\
         project_doc_fallback_filenames = []\n",
    );
    out.push_str(&format!("chatgpt_base_url = {}\n", quote(NO_BACKEND)));
    out.push_str(
        "web_search = \"disabled\"\n\
         cli_auth_credentials_store = \"file\"\n\
         \n\
         [skills]\n\
         include_instructions = false\n\
         \n\
         [skills.bundled]\n\
         enabled = false\n\
         \n\
         [history]\n\
         persistence = \"none\"\n\
         \n\
         [analytics]\n\
         enabled = false\n\
         \n\
         [feedback]\n\
         enabled = false\n\
         \n\
         [otel]\n\
         exporter = \"none\"\n\
         log_user_prompt = false\n\
         \n\
         [features]\n\
         apps = false\n\
         hooks = false\n\
         plugins = false\n\
         memories = false\n\
         multi_agent = false\n\
         goals = false\n\
         shell_snapshot = false\n\
         skill_mcp_dependency_install = false\n\
         unbounded_connection_retries = false\n\
         \n",
    );
    out.push_str(&format!("[model_providers.{PROVIDER}]\n"));
    out.push_str(&format!("name = {}\n", quote("stet gateway")));
    out.push_str(&format!("base_url = {}\n", quote(walled.base_url)));
    out.push_str(
        "wire_api = \"responses\"\n\
         requires_openai_auth = true\n\
         request_max_retries = 2\n\
         stream_max_retries = 2\n\
         stream_idle_timeout_ms = 300000\n",
    );
    out
}

/// The exact text of `rules/stet.rules`.
pub fn rules() -> String {
    format!(
        "# Written by stet: the wall proof's canary, refused by Codex's own exec policy.\n\
         prefix_rule(\n    pattern = [{}],\n    decision = \"forbidden\",\n    justification = {},\n)\n",
        quote(WALL_CANARY),
        quote(CANARY_JUSTIFICATION)
    )
}

/// Whether `found` is exactly `expected`; else where it first differs, in words (a line
/// number and which side is longer, never the line itself: the file may hold anything).
pub fn compare(found: &str, expected: &str) -> Result<(), String> {
    if found == expected {
        return Ok(());
    }
    let mut f = found.lines();
    let mut e = expected.lines();
    let mut line = 0usize;
    loop {
        line = line.saturating_add(1);
        match (f.next(), e.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(_), Some(_)) => return Err(format!("line {line} differs from what stet wrote")),
            (Some(_), None) => {
                return Err(format!("it holds more than stet wrote, from line {line}"))
            }
            (None, Some(_)) => return Err(format!("it ends early, at line {line}")),
            (None, None) => return Err("its line ends differ from what stet wrote".into()),
        }
    }
}

/// A TOML basic string (also a Starlark string): quotes, backslashes and control
/// characters escaped.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len().saturating_add(2));
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_exactly_this_text() {
        let text = text(&Walled {
            base_url: "http://127.0.0.1:3180/backend-api/codex",
            model: Some("gpt-5.5"),
        });
        assert_eq!(
            text,
            r#"# Written by stet: the walled configuration of the Codex harness. stet rewrites it
# at the start of each drive and stops a drive when it differs; do not edit it.
model_provider = "stet"
model = "gpt-5.5"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
project_doc_max_bytes = 0
project_doc_fallback_filenames = []
chatgpt_base_url = "http://127.0.0.1:0/"
web_search = "disabled"
cli_auth_credentials_store = "file"

[skills]
include_instructions = false

[skills.bundled]
enabled = false

[history]
persistence = "none"

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
log_user_prompt = false

[features]
apps = false
hooks = false
plugins = false
memories = false
multi_agent = false
goals = false
shell_snapshot = false
skill_mcp_dependency_install = false
unbounded_connection_retries = false

[model_providers.stet]
name = "stet gateway"
base_url = "http://127.0.0.1:3180/backend-api/codex"
wire_api = "responses"
requires_openai_auth = true
request_max_retries = 2
stream_max_retries = 2
stream_idle_timeout_ms = 300000
"#
        );
        let without = super::text(&Walled {
            base_url: "http://127.0.0.1:3180/v1",
            model: None,
        });
        assert!(!without.contains("\nmodel ="), "{without}");
    }

    /// What Codex 0.163.0 reads from a lane as instructions, and where it calls besides the
    /// model API, each with the key that turns it off (measured with the real CLI on a lane
    /// holding all of them; see the module's words). Read as TOML, as Codex reads it.
    #[test]
    fn the_config_turns_off_what_codex_reads_from_a_lane_and_its_side_calls() {
        let text = text(&Walled {
            base_url: "http://127.0.0.1:3180/backend-api/codex",
            model: None,
        });
        let config: toml::Table = text.parse().expect("the config is TOML");
        let at = |path: &str| {
            let mut value = config.get(path.split('.').next().unwrap());
            for key in path.split('.').skip(1) {
                value = value.and_then(|v| v.get(key));
            }
            value
                .cloned()
                .unwrap_or_else(|| panic!("no {path} in\n{text}"))
        };
        let off = toml::Value::Boolean(false);
        // AGENTS.md, AGENTS.override.md and any fallback name: none read.
        assert_eq!(at("project_doc_max_bytes"), toml::Value::Integer(0));
        assert_eq!(
            at("project_doc_fallback_filenames"),
            toml::Value::Array(vec![])
        );
        // .codex/skills and .agents/skills: never listed in the developer message; Codex's
        // bundled skills dropped.
        assert_eq!(at("skills.include_instructions"), off);
        assert_eq!(at("skills.bundled.enabled"), off);
        // Hooks from anywhere, a skill's MCP servers, plugins, apps, memories, sub-agents.
        for feature in [
            "hooks",
            "skill_mcp_dependency_install",
            "plugins",
            "apps",
            "memories",
            "multi_agent",
        ] {
            assert_eq!(at(&format!("features.{feature}")), off, "{feature}");
        }
        // ChatGPT's backend (accounts/check, settings/user): port 0 of the sandbox's own
        // loopback, where nothing can listen; never chatgpt.com.
        assert_eq!(at("chatgpt_base_url").as_str(), Some("http://127.0.0.1:0/"));
        assert_eq!(at("analytics.enabled"), off);
        assert_eq!(at("feedback.enabled"), off);
        assert_eq!(at("check_for_update_on_startup"), off);
        assert_eq!(at("otel.exporter").as_str(), Some("none"));
        assert!(!text.contains("chatgpt.com"), "{text}");
        // The model API, the one host, through the gateway.
        assert_eq!(
            at("model_providers.stet.base_url").as_str(),
            Some("http://127.0.0.1:3180/backend-api/codex")
        );
    }

    #[test]
    fn the_rule_forbids_the_canary_in_stets_words() {
        assert_eq!(
            rules(),
            "# Written by stet: the wall proof's canary, refused by Codex's own exec policy.\n\
             prefix_rule(\n    pattern = [\"stet-wall-canary\"],\n    decision = \"forbidden\",\n    \
             justification = \"stet canary: refused by stet's exec-policy rule\",\n)\n"
        );
    }

    #[test]
    fn a_difference_is_named_by_line_never_by_content() {
        let expected = "a\nb\n";
        assert_eq!(compare("a\nb\n", expected), Ok(()));
        let e = compare("a\nsecret-ish\n", expected).unwrap_err();
        assert_eq!(e, "line 2 differs from what stet wrote");
        assert!(compare("a\nb\nc\n", expected).unwrap_err().contains("more"));
        assert!(compare("a\n", expected).unwrap_err().contains("early"));
        assert!(compare("a\r\nb\r\n", expected)
            .unwrap_err()
            .contains("line ends"));
    }

    #[test]
    fn values_are_quoted_for_toml() {
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quote("x\u{1b}y\n"), "\"x\\u001By\\n\"");
    }
}
