//! The `[plugins.command]` table: read, checked and resolved once, when the plugin is made.
//!
//! Relative host paths (an `argv[0]` holding a `/` but not starting with one, and every
//! entry of `mounts`) are resolved against the repository root: the first directory,
//! walking up from the current directory, that contains `.git`. They are resolved
//! lexically (`.` and `..` folded), without following symbolic links.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use stet_plugin_api::PluginError;

/// The remedy of every bad-table error: the keys there are.
pub const KEYS: &str = "the keys under [plugins.command] are `implement` (argv array, required), \
     `review` (argv array, default: implement), `mounts` (host paths, read-only), \
     `network` (\"none\", the default), `allow_hosts` (the hosts it needs, reached through stet's proxy), `env` (NAME = \"value\"), \
     `profile` (a directory name under the profiles root) and `credentials` ([{ host, header, value, \
     from = { env | file | command }, variable, base_url }]); see examples/agent/README.md";

/// The default profile directory's name under the profiles root.
pub const DEFAULT_PROFILE: &str = ".command";

/// Environment names stet sets itself and a configuration may not set.
const RESERVED_ENV: [&str; 2] = ["HOME", "STET_ROLE"];

/// The table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    implement: Option<Vec<String>>,
    review: Option<Vec<String>>,
    #[serde(default)]
    mounts: Vec<String>,
    network: Option<NetworkWord>,
    allow_hosts: Option<Vec<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    profile: Option<String>,
    #[serde(default)]
    credentials: Vec<RawCredential>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCredential {
    host: String,
    header: Option<String>,
    value: Option<String>,
    from: From,
    variable: String,
    base_url: Option<String>,
}

/// Where a credential's secret is read, on the host, at each call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum From {
    /// A variable of stet's own environment.
    Env(String),
    /// A file (its content, trailing newlines trimmed).
    File(PathBuf),
    /// A command's standard output (`gh auth token`, `op read ...`), run with PATH and HOME
    /// only.
    Command(Vec<String>),
}

/// A credential the agent uses, kept out of its sandbox: the agent sees a stand-in in
/// `variable`; stet's gateway for `host` swaps the secret in (`header: value`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// `host[:port]` of the API.
    pub host: String,
    /// The header the secret travels in.
    pub header: String,
    /// The header's value, `{secret}` standing for the secret.
    pub value: String,
    /// Where the secret is read.
    pub from: From,
    /// The variable the agent finds its (stand-in) credential in.
    pub variable: String,
    /// A variable set to the gateway's URL inside the sandbox, for the agent's base URL.
    pub base_url: Option<String>,
}

impl Credential {
    /// `host[:port]`, without the path the credential is for.
    pub fn authority(&self) -> &str {
        self.host.split('/').next().unwrap_or(&self.host)
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum NetworkWord {
    None,
    /// Refused by name: an agent never gets the runtime's open network any more.
    Open,
}

/// The network the agent gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net {
    /// Loopback only (the default).
    None,
    /// These hosts only, through stet's proxy (the sandbox itself has loopback only).
    AllowHosts(Vec<String>),
}

impl Net {
    /// How it is written in the settings text and in facts.
    pub fn describe(&self) -> String {
        match self {
            Net::None => "none".to_string(),
            Net::AllowHosts(hosts) => format!("allow_hosts {}", hosts.join(", ")),
        }
    }
}

/// The checked, resolved configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The implement role's argv, `argv[0]` absolute when it was a relative path. `None`
    /// when not configured: the plugin is then unavailable.
    pub implement: Option<Vec<String>>,
    /// The review role's argv, when it differs from `implement`'s.
    pub review: Option<Vec<String>>,
    /// Host paths mounted read-only at the same path.
    pub mounts: Vec<PathBuf>,
    /// The network.
    pub network: Net,
    /// Literal variables for the agent, by name.
    pub env: BTreeMap<String, String>,
    /// The profile directory's name under the profiles root.
    pub profile: String,
    /// Credentials kept out of the sandbox.
    pub credentials: Vec<Credential>,
}

impl Config {
    /// The distinct credential hosts in order: the n-th is served at the gateway port
    /// `GATEWAY_PORT + n` inside the sandbox (as the host assigns them).
    pub fn gateway_hosts(&self) -> Vec<&str> {
        let mut hosts: Vec<&str> = Vec::new();
        for c in &self.credentials {
            if !hosts.contains(&c.authority()) {
                hosts.push(c.authority());
            }
        }
        hosts
    }

    /// The argv of a role: `review` falls back to `implement`.
    pub fn argv(&self, review: bool) -> Option<&[String]> {
        if review {
            self.review.as_deref().or(self.implement.as_deref())
        } else {
            self.implement.as_deref()
        }
    }
}

/// The first directory at or above `dir` that contains `.git`.
pub fn repository_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// Whether `argv0` names a host path (rather than a name looked up on the sandbox's PATH).
pub fn is_host_path(argv0: &str) -> bool {
    argv0.contains('/')
}

fn bad(message: impl Into<String>) -> PluginError {
    PluginError::invalid_input(format!(
        "bad [plugins.command] settings: {}",
        message.into()
    ))
    .with_remedy(KEYS)
}

/// Reads the table (JSON, as the host hands it over), resolving relative paths against
/// the repository that holds `cwd`.
pub fn parse(json: &str, cwd: &Path) -> Result<Config, PluginError> {
    let raw: Raw = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    let root = repository_root(cwd);
    let resolve = |what: &str, path: &str| -> Result<PathBuf, PluginError> {
        let path = Path::new(path);
        if path.is_absolute() {
            return Ok(normalise(path));
        }
        match &root {
            Some(root) => Ok(normalise(&root.join(path))),
            None => Err(PluginError::invalid_input(format!(
                "bad [plugins.command] settings: {what} `{}` is a relative path, and {} is not \
                 inside a git repository to resolve it against",
                path.display(),
                cwd.display()
            ))
            .with_remedy(
                "give an absolute path, or run stet inside the repository whose stet.toml names it",
            )),
        }
    };
    let argv = |key: &str, argv: Option<Vec<String>>| -> Result<Option<Vec<String>>, PluginError> {
        let Some(mut argv) = argv else {
            return Ok(None);
        };
        let Some(first) = argv.first() else {
            return Err(bad(format!("`{key}` is empty: it must name a program")));
        };
        if first.trim().is_empty() {
            return Err(bad(format!("`{key}`'s first element names no program")));
        }
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(bad(format!("`{key}` holds a NUL character")));
        }
        if is_host_path(first) {
            argv[0] = resolve(&format!("{key}[0]"), first)?.display().to_string();
        }
        Ok(Some(argv))
    };
    let implement = argv("implement", raw.implement)?;
    let review = argv("review", raw.review)?;
    if review.is_some() && implement.is_none() {
        return Err(bad("`review` is set but `implement` is not"));
    }
    let review = review.filter(|r| Some(r) != implement.as_ref());
    let mut mounts = Vec::new();
    for m in &raw.mounts {
        if m.trim().is_empty() {
            return Err(bad("`mounts` holds an empty path"));
        }
        let path = resolve("mount", m)?;
        if path == Path::new("/") {
            return Err(bad("`mounts` holds `/`: mount only what the agent needs"));
        }
        // The repository's git directory holds its remote's URL, stet's receipts and logs:
        // never visible to an agent, whose lane is all it needs of the repository.
        if let Some(root) = &root {
            let git = normalise(&root.join(".git"));
            if git.starts_with(&path) || path.starts_with(&git) {
                return Err(bad(format!(
                    "`mounts` entry `{m}` would show the agent the repository's .git ({}); the agent's lane is mounted for it",
                    git.display()
                )));
            }
        }
        if !mounts.contains(&path) {
            mounts.push(path);
        }
    }
    let network = match (raw.network, raw.allow_hosts) {
        (Some(_), Some(_)) => {
            return Err(bad(
                "`network` and `allow_hosts` are both set: use one (`allow_hosts` alone opens \
                 the network to those hosts)",
            ));
        }
        (None, Some(hosts)) => {
            if hosts.is_empty() {
                return Err(bad(
                    "`allow_hosts` is empty: name hosts, or use network = \"none\"",
                ));
            }
            for h in &hosts {
                let ok = !h.is_empty()
                    && h.chars().all(|c| {
                        c.is_ascii_alphanumeric()
                            || matches!(c, '.' | '-' | '_' | ':' | '*' | '[' | ']')
                    });
                if !ok {
                    return Err(bad(format!(
                        "`allow_hosts` entry `{h}` is not a host (e.g. \"api.example.com\", \"api.example.com:8443\", \"*.example.com\")"
                    )));
                }
            }
            Net::AllowHosts(hosts)
        }
        (Some(NetworkWord::Open), None) => {
            return Err(bad(
                "network = \"open\" would give the agent the runtime's whole network, which stet does not do: \
                 name the hosts it needs in allow_hosts (reached through stet's proxy)",
            ));
        }
        (Some(NetworkWord::None), None) | (None, None) => Net::None,
    };
    for name in raw.env.keys() {
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(bad(format!(
                "`env` name `{name}` is not a variable name (letters, digits, _)"
            )));
        }
        if RESERVED_ENV.contains(&name.as_str()) || name.starts_with("STET_") {
            return Err(bad(format!(
                "`env` may not set {name}: HOME is the profile directory and STET_ names are stet's"
            )));
        }
    }
    if raw.env.values().any(|v| v.contains('\0')) {
        return Err(bad("an `env` value holds a NUL character"));
    }
    let profile = raw.profile.unwrap_or_else(|| DEFAULT_PROFILE.to_string());
    if profile.is_empty()
        || profile == "."
        || profile == ".."
        || profile.contains('/')
        || profile.contains('\0')
    {
        return Err(bad(format!(
            "`profile` `{profile}` is not a directory name (one path component, e.g. \"codex\")"
        )));
    }
    let credentials = raw
        .credentials
        .into_iter()
        .map(|c| credential(c, &raw.env))
        .collect::<Result<Vec<_>, _>>()?;
    let mut names: Vec<&str> = Vec::new();
    for name in credentials
        .iter()
        .flat_map(|c| std::iter::once(c.variable.as_str()).chain(c.base_url.as_deref()))
    {
        if names.contains(&name) {
            return Err(bad(format!(
                "`credentials` name the variable {name} twice: give each its own"
            )));
        }
        names.push(name);
    }
    // A credential's host is one the agent needs: declared, so the proof expects the proxy.
    let network = match network {
        _ if credentials.is_empty() => network,
        Net::None => Net::AllowHosts(Vec::new()),
        hosts => hosts,
    };
    let network = match network {
        Net::AllowHosts(mut hosts) => {
            for c in &credentials {
                if !hosts.iter().any(|h| h == c.authority()) {
                    hosts.push(c.authority().to_string());
                }
            }
            Net::AllowHosts(hosts)
        }
        none => none,
    };
    Ok(Config {
        implement,
        review,
        mounts,
        network,
        env: raw.env,
        profile,
        credentials,
    })
}

fn is_variable_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One `credentials` entry, checked.
fn credential(
    raw: RawCredential,
    env: &BTreeMap<String, String>,
) -> Result<Credential, PluginError> {
    // `host[:port]`, and optionally the path the credential is for (`/v1/`).
    let (authority, path) = match raw.host.find('/') {
        Some(i) => (&raw.host[..i], &raw.host[i..]),
        None => (raw.host.as_str(), ""),
    };
    let host_ok = !authority.is_empty()
        && authority
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_'))
        && !authority.ends_with(':')
        && !path.contains("//")
        && !path.split('/').any(|s| s == "..");
    if !host_ok {
        return Err(bad(format!(
            "`credentials` host `{}` is not a host (e.g. \"api.example.com\", \"api.example.com:8443\" or \"api.example.com/v1/\")",
            raw.host
        )));
    }
    let header = raw.header.unwrap_or_else(|| "Authorization".to_string());
    if header.is_empty()
        || !header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(bad(format!(
            "`credentials` header `{header}` is not a header name"
        )));
    }
    let value = raw.value.unwrap_or_else(|| "Bearer {secret}".to_string());
    if !value.contains("{secret}") || value.chars().any(|c| c.is_control()) {
        return Err(bad(format!(
            "`credentials` value `{value}` must hold {{secret}} (e.g. \"Bearer {{secret}}\") and no control character"
        )));
    }
    for (what, name) in [
        ("variable", Some(&raw.variable)),
        ("base_url", raw.base_url.as_ref()),
    ] {
        let Some(name) = name else { continue };
        if !is_variable_name(name)
            || RESERVED_ENV.contains(&name.as_str())
            || name.starts_with("STET_")
            || env.contains_key(name)
        {
            return Err(bad(format!(
                "`credentials` {what} `{name}` is not a free variable name (letters, digits, _; not HOME, STET_*, nor one `env` sets)"
            )));
        }
    }
    match &raw.from {
        From::Env(name) if !is_variable_name(name) => {
            return Err(bad(format!(
                "`credentials` from env `{name}` is not a variable name"
            )));
        }
        From::File(path) if !path.is_absolute() && !path.starts_with("~") => {
            return Err(bad(format!(
                "`credentials` from file `{}` must be an absolute path (or start with ~)",
                path.display()
            )));
        }
        From::Command(argv) if argv.is_empty() => {
            return Err(bad("`credentials` from command is empty"));
        }
        _ => {}
    }
    Ok(Credential {
        host: raw.host,
        header,
        value,
        from: raw.from,
        variable: raw.variable,
        base_url: raw.base_url,
    })
}

/// `path` with `.` dropped and `..` folded, lexically.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Whether an environment name looks like it carries a credential: it contains KEY,
/// TOKEN, SECRET, PASSWORD, CREDENTIAL or AUTH (any case). `AUTHOR` and `AUTHORS` as a
/// whole `_`-separated word (`GIT_AUTHOR_NAME`) are not credentials.
pub fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.split('_').any(|word| {
        ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"]
            .iter()
            .any(|k| word.contains(k))
            || (word.contains("AUTH") && word != "AUTHOR" && word != "AUTHORS")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("stet-command-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn nothing_configured_is_a_valid_empty_table() {
        let c = parse("{}", Path::new("/")).unwrap();
        assert_eq!(c.implement, None);
        assert_eq!(c.argv(true), None);
        assert_eq!(c.network, Net::None);
        assert_eq!(c.profile, ".command");
    }

    #[test]
    fn a_full_table_is_read() {
        let c = parse(
            r#"{"implement":["/opt/agent/run","--yes"],"review":["/opt/agent/judge"],
                "mounts":["/opt/share"],"allow_hosts":["api.example.com"],
                "env":{"MODEL":"small","GIT_AUTHOR_NAME":"agent"},"profile":"codex"}"#,
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.argv(false).unwrap(), ["/opt/agent/run", "--yes"]);
        assert_eq!(c.argv(true).unwrap(), ["/opt/agent/judge"]);
        assert_eq!(c.mounts, [PathBuf::from("/opt/share")]);
        assert_eq!(c.network, Net::AllowHosts(vec!["api.example.com".into()]));
        assert_eq!(c.env["MODEL"], "small");
        assert_eq!(c.profile, "codex");
    }

    #[test]
    fn review_defaults_to_implement_and_a_bare_name_stays_bare() {
        let c = parse(
            r#"{"implement":["codex","exec"],"allow_hosts":["api.example.com"]}"#,
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.argv(true).unwrap(), ["codex", "exec"]);
        assert_eq!(c.network, Net::AllowHosts(vec!["api.example.com".into()]));
    }

    #[test]
    fn a_credential_names_its_host_source_and_variable_and_is_a_declared_host() {
        let c = parse(
            r#"{"implement":["a"],"credentials":[{"host":"api.example.com","from":{"command":["gh","auth","token"]},"variable":"GH_TOKEN","base_url":"GH_URL"}]}"#,
            Path::new("/"),
        )
        .unwrap();
        let credential = &c.credentials[0];
        assert_eq!(
            (credential.header.as_str(), credential.value.as_str()),
            ("Authorization", "Bearer {secret}")
        );
        assert_eq!(
            credential.from,
            From::Command(vec!["gh".into(), "auth".into(), "token".into()])
        );
        assert_eq!(c.network, Net::AllowHosts(vec!["api.example.com".into()]));
        assert_eq!(c.gateway_hosts(), ["api.example.com"]);
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_bad_input_naming_the_keys() {
        for json in [
            r#"{"implement":["a"],"timeout":"5m"}"#,
            r#"{"implement":"a"}"#,
            r#"{"network":"host"}"#,
            r#"{"implement":["a"],"network":"open"}"#,
            r#"{"implement":[]}"#,
            r#"{"review":["a"]}"#,
            r#"{"implement":["a"],"network":"open","allow_hosts":["x"]}"#,
            r#"{"implement":["a"],"allow_hosts":[]}"#,
            r#"{"implement":["a"],"allow_hosts":["http://x/"]}"#,
            r#"{"implement":["a"],"env":{"HOME":"/x"}}"#,
            r#"{"implement":["a"],"env":{"STET_ROLE":"x"}}"#,
            r#"{"implement":["a"],"env":{"A-B":"x"}}"#,
            r#"{"implement":["a"],"profile":"../x"}"#,
            r#"{"implement":["a"],"mounts":["/"]}"#,
            r#"{"implement":["a"],"credentials":[{"host":"x","from":{"env":"K"}}]}"#,
            r#"{"implement":["a"],"credentials":[{"host":"http://x","from":{"env":"K"},"variable":"V"}]}"#,
            r#"{"implement":["a"],"credentials":[{"host":"x","from":{"env":"K"},"variable":"HOME"}]}"#,
            r#"{"implement":["a"],"credentials":[{"host":"x","from":{"file":"rel"},"variable":"V"}]}"#,
            r#"{"implement":["a"],"credentials":[{"host":"x","from":{"command":[]},"variable":"V"}]}"#,
            r#"{"implement":["a"],"credentials":[{"host":"x","from":{"env":"K"},"variable":"V","value":"no secret"}]}"#,
            r#"{"implement":["a"],"credentials":[{"host":"x","from":{"keyring":"K"},"variable":"V"}]}"#,
            r#"{"implement":["a"],"credentials":[{"host":"x","from":{"env":"K"},"variable":"V"},{"host":"y","from":{"env":"L"},"variable":"W","base_url":"V"}]}"#,
        ] {
            let e = parse(json, Path::new("/")).unwrap_err();
            assert_eq!(e.code, stet_plugin_api::ErrorCode::INVALID_INPUT, "{json}");
            assert!(e.remedy.contains("`implement`"), "{json}: {}", e.remedy);
        }
        let e = parse(r#"{"implement":["a"],"timeout":"5m"}"#, Path::new("/")).unwrap_err();
        assert!(
            e.message.contains("unknown field `timeout`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn relative_paths_are_resolved_against_the_repository_root() {
        let repo = scratch("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let deep = repo.join("src/deeper");
        std::fs::create_dir_all(&deep).unwrap();
        let c = parse(
            r#"{"implement":["./tools/agent.sh","x/y"],"mounts":["tools/../share","/abs"]}"#,
            &deep,
        )
        .unwrap();
        assert_eq!(
            c.argv(false).unwrap(),
            [
                repo.join("tools/agent.sh").display().to_string(),
                "x/y".to_string()
            ]
        );
        assert_eq!(c.mounts, [repo.join("share"), PathBuf::from("/abs")]);
        std::fs::remove_dir_all(&repo).unwrap();
    }

    #[test]
    fn a_relative_path_outside_a_repository_is_refused() {
        let dir = scratch("norepo");
        let e = parse(r#"{"implement":["bin/agent"]}"#, &dir).unwrap_err();
        assert!(
            e.message.contains("not inside a git repository"),
            "{}",
            e.message
        );
        assert!(e.remedy.contains("absolute path"));
        // A bare name needs no resolution.
        assert!(parse(r#"{"implement":["agent"]}"#, &dir).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn credential_names_are_recognised() {
        for name in [
            "OPENAI_API_KEY",
            "api_token",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AUTHORIZATION",
            "OAUTH",
            "APIKEY",
        ] {
            assert!(looks_like_credential(name), "{name}");
        }
        for name in [
            "MODEL",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "LANG",
            "AUTHORS",
        ] {
            assert!(!looks_like_credential(name), "{name}");
        }
    }
}
