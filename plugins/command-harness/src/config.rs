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
     `profile` (a directory name under the profiles root), `credentials` ([{ host, header, value, \
     from = { env | file | command }, variable, base_url }]) and `credential_files` ([{ path, pointers, \
     host, header, value, base_url }]: secrets in a JSON file of the profile); see examples/agent/README.md";

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
    #[serde(default)]
    credential_files: Vec<RawCredentialFile>,
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCredentialFile {
    path: String,
    pointers: Vec<String>,
    host: Option<String>,
    header: Option<String>,
    value: Option<String>,
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
        authority(&self.host)
    }
}

/// Secrets the agent keeps in a JSON file of its profile (its own login, `.codex/auth.json`),
/// kept out of the sandbox: each call's copy of the profile holds a stand-in at each pointer,
/// and stet's gateway for `host` swaps the real value in (`header: value`). Without a host,
/// a secret no request of the sandbox needs (a refresh token): kept out, sent nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialFile {
    /// The file, relative to the profile directory (plain path components only).
    pub path: String,
    /// The JSON pointers (RFC 6901) of its secrets.
    pub pointers: Vec<String>,
    /// `host[:port][/path-prefix]` the secrets are sent to; `None`: nowhere.
    pub host: Option<String>,
    /// The header they travel in (with a host).
    pub header: String,
    /// The header's value, `{secret}` standing for the secret.
    pub value: String,
    /// A variable set to the gateway's URL inside the sandbox, for the agent's base URL.
    pub base_url: Option<String>,
}

impl CredentialFile {
    /// `host[:port]`, without the path the secrets are for; `None` when sent nowhere.
    pub fn authority(&self) -> Option<&str> {
        self.host.as_deref().map(authority)
    }

    /// The id each pointer's secret is declared under: `path#pointer`.
    pub fn id(&self, pointer: &str) -> String {
        format!("{}#{pointer}", self.path)
    }
}

/// `host[:port]` of `host[:port][/path]`.
fn authority(host: &str) -> &str {
    host.split('/').next().unwrap_or(host)
}

/// How the host tells gateways apart: `host` and `host:443` are one.
fn gateway_key(authority: &str) -> &str {
    authority.strip_suffix(":443").unwrap_or(authority)
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
    /// Secrets in files of the profile, kept out of the sandbox.
    pub credential_files: Vec<CredentialFile>,
}

impl Config {
    /// The distinct credential hosts in the order they are declared (`credentials`, then
    /// `credential_files`): the n-th is served at the gateway port `GATEWAY_PORT + n` inside
    /// the sandbox (as the host assigns them).
    pub fn gateway_hosts(&self) -> Vec<&str> {
        let mut hosts: Vec<&str> = Vec::new();
        let declared = self
            .credentials
            .iter()
            .map(|c| c.authority())
            .chain(self.credential_files.iter().filter_map(|f| f.authority()));
        for authority in declared {
            if !hosts
                .iter()
                .any(|h| gateway_key(h) == gateway_key(authority))
            {
                hosts.push(authority);
            }
        }
        hosts
    }

    /// The port inside the sandbox at which the gateway for `authority` is served.
    pub fn gateway_port(&self, authority: &str) -> u16 {
        let n = self
            .gateway_hosts()
            .iter()
            .position(|h| gateway_key(h) == gateway_key(authority))
            .unwrap_or(0);
        stet_plugin_api::GATEWAY_PORT + n as u16
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
    let network = network_of(raw.network, raw.allow_hosts)?;
    check_env(&raw.env)?;
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
    let credential_files = raw
        .credential_files
        .into_iter()
        .map(|f| credential_file(f, &raw.env))
        .collect::<Result<Vec<_>, _>>()?;
    declared_once(&credentials, &credential_files)?;
    let network = with_credential_hosts(network, &credentials, &credential_files);
    Ok(Config {
        implement,
        review,
        mounts,
        network,
        env: raw.env,
        profile,
        credentials,
        credential_files,
    })
}

/// The agent's network as `network` and `allow_hosts` say: none, or the hosts named
/// (each a host, reached through stet's proxy); never the open network.
fn network_of(
    network: Option<NetworkWord>,
    allow_hosts: Option<Vec<String>>,
) -> Result<Net, PluginError> {
    Ok(match (network, allow_hosts) {
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
    })
}

/// The names and values `env` sets: variable names, none of stet's or HOME's, no NUL.
fn check_env(env: &BTreeMap<String, String>) -> Result<(), PluginError> {
    for name in env.keys() {
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
    if env.values().any(|v| v.contains('\0')) {
        return Err(bad("an `env` value holds a NUL character"));
    }
    Ok(())
}

/// Each credential file's pointer declared once, and each variable a credential names
/// named by one credential.
fn declared_once(
    credentials: &[Credential],
    credential_files: &[CredentialFile],
) -> Result<(), PluginError> {
    let mut declared: Vec<(&str, &str)> = Vec::new();
    for file in credential_files {
        for pointer in &file.pointers {
            if declared.contains(&(file.path.as_str(), pointer.as_str())) {
                return Err(bad(format!(
                    "`credential_files` declare {pointer} in {} twice: once is enough",
                    file.path
                )));
            }
            declared.push((file.path.as_str(), pointer.as_str()));
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for name in credentials
        .iter()
        .flat_map(|c| std::iter::once(c.variable.as_str()).chain(c.base_url.as_deref()))
        .chain(
            credential_files
                .iter()
                .filter_map(|f| f.base_url.as_deref()),
        )
    {
        if names.contains(&name) {
            return Err(bad(format!(
                "`credentials` name the variable {name} twice: give each its own"
            )));
        }
        names.push(name);
    }
    Ok(())
}

/// `network` with every credential's host allowed: a credential's host is one the agent
/// needs, declared, so the proof expects the proxy.
fn with_credential_hosts(
    network: Net,
    credentials: &[Credential],
    credential_files: &[CredentialFile],
) -> Net {
    let sent_to: Vec<&str> = credentials
        .iter()
        .map(|c| c.authority())
        .chain(credential_files.iter().filter_map(|f| f.authority()))
        .collect();
    let network = match network {
        _ if sent_to.is_empty() => network,
        Net::None => Net::AllowHosts(Vec::new()),
        hosts => hosts,
    };
    match network {
        Net::AllowHosts(mut hosts) => {
            for authority in &sent_to {
                if !hosts.iter().any(|h| h == authority) {
                    hosts.push(authority.to_string());
                }
            }
            Net::AllowHosts(hosts)
        }
        none => none,
    }
}

fn is_variable_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A credential's `host`, `header` and `value`, checked; `what` names the key, for errors.
fn destination(
    what: &str,
    host: &str,
    header: Option<String>,
    value: Option<String>,
) -> Result<(String, String), PluginError> {
    // `host[:port]`, and optionally the path the credential is for (`/v1/`).
    let (authority, path) = match host.find('/') {
        Some(i) => (&host[..i], &host[i..]),
        None => (host, ""),
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
            "`{what}` host `{host}` is not a host (e.g. \"api.example.com\", \"api.example.com:8443\" or \"api.example.com/v1/\")"
        )));
    }
    let header = header.unwrap_or_else(|| "Authorization".to_string());
    if header.is_empty()
        || !header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(bad(format!(
            "`{what}` header `{header}` is not a header name"
        )));
    }
    let value = value.unwrap_or_else(|| "Bearer {secret}".to_string());
    if !value.contains("{secret}") || value.chars().any(|c| c.is_control()) {
        return Err(bad(format!(
            "`{what}` value `{value}` must hold {{secret}} (e.g. \"Bearer {{secret}}\") and no control character"
        )));
    }
    Ok((header, value))
}

/// Whether `name` is free for a variable stet sets: a variable name, not HOME, STET_* or
/// one `env` sets.
fn free_variable(name: &str, env: &BTreeMap<String, String>) -> bool {
    is_variable_name(name)
        && !RESERVED_ENV.contains(&name)
        && !name.starts_with("STET_")
        && !env.contains_key(name)
}

/// One `credentials` entry, checked.
fn credential(
    raw: RawCredential,
    env: &BTreeMap<String, String>,
) -> Result<Credential, PluginError> {
    let (header, value) = destination("credentials", &raw.host, raw.header, raw.value)?;
    for (what, name) in [
        ("variable", Some(&raw.variable)),
        ("base_url", raw.base_url.as_ref()),
    ] {
        let Some(name) = name else { continue };
        if !free_variable(name, env) {
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

/// Whether `pointer` is a JSON pointer (RFC 6901) to something inside a document: it starts
/// with `/`, and each `~` is `~0` or `~1`.
fn is_pointer(pointer: &str) -> bool {
    pointer.starts_with('/')
        && !pointer.chars().any(|c| c.is_control())
        && pointer
            .split('~')
            .skip(1)
            .all(|rest| rest.starts_with('0') || rest.starts_with('1'))
}

/// One `credential_files` entry, checked.
fn credential_file(
    raw: RawCredentialFile,
    env: &BTreeMap<String, String>,
) -> Result<CredentialFile, PluginError> {
    let path = Path::new(&raw.path);
    let inside = !raw.path.is_empty()
        && !raw.path.contains('\0')
        && path.components().all(|c| matches!(c, Component::Normal(_)));
    if !inside {
        return Err(bad(format!(
            "`credential_files` path `{}` is not a path inside the profile (relative, e.g. \".codex/auth.json\"; no `.` or `..`)",
            raw.path
        )));
    }
    if raw.pointers.is_empty() {
        return Err(bad(format!(
            "`credential_files` entry for `{}` names no `pointers` (e.g. [\"/tokens/access_token\"])",
            raw.path
        )));
    }
    for pointer in &raw.pointers {
        if !is_pointer(pointer) {
            return Err(bad(format!(
                "`credential_files` pointer `{pointer}` is not a JSON pointer into the file (e.g. \"/tokens/access_token\")"
            )));
        }
    }
    let (header, value) = match &raw.host {
        Some(host) => destination("credential_files", host, raw.header, raw.value)?,
        None if raw.header.is_some() || raw.value.is_some() || raw.base_url.is_some() => {
            return Err(bad(format!(
                "`credential_files` entry for `{}` sets header, value or base_url without a host: \
                 name the host its secrets are for, or none to keep them out and send them nowhere",
                raw.path
            )));
        }
        None => (String::new(), String::new()),
    };
    if let Some(name) = &raw.base_url {
        if !free_variable(name, env) {
            return Err(bad(format!(
                "`credential_files` base_url `{name}` is not a free variable name (letters, digits, _; not HOME, STET_*, nor one `env` sets)"
            )));
        }
    }
    // Written as stet reads it: `a/b`, never `a//b` or `a/b/`.
    let path = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    Ok(CredentialFile {
        path,
        pointers: raw.pointers,
        host: raw.host,
        header,
        value,
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
    fn credential_files_name_a_profile_file_its_pointers_and_where_they_go() {
        let c = parse(
            r#"{"implement":["codex"],"allow_hosts":["example.org"],"credential_files":[
                {"path":".codex/auth.json","pointers":["/tokens/access_token"],"host":"chatgpt.com/backend-api/codex","base_url":"CODEX_URL"},
                {"path":".codex//auth.json","pointers":["/OPENAI_API_KEY"],"host":"api.openai.com/v1","header":"X-Key","value":"{secret}"},
                {"path":".codex/auth.json","pointers":["/tokens/refresh_token","/tokens/id_token"]}]}"#,
            Path::new("/"),
        )
        .unwrap();
        let [access, key, kept] = &c.credential_files[..] else {
            panic!("{:?}", c.credential_files)
        };
        assert_eq!(access.path, ".codex/auth.json");
        assert_eq!(
            (access.header.as_str(), access.value.as_str()),
            ("Authorization", "Bearer {secret}")
        );
        assert_eq!(access.authority(), Some("chatgpt.com"));
        assert_eq!(
            access.id("/tokens/access_token"),
            ".codex/auth.json#/tokens/access_token"
        );
        assert_eq!(key.path, ".codex/auth.json", "written as stet reads it");
        assert_eq!(
            (key.header.as_str(), key.value.as_str()),
            ("X-Key", "{secret}")
        );
        // Kept out, sent nowhere: no header, no host, no network.
        assert_eq!((kept.host.as_deref(), kept.header.as_str()), (None, ""));
        assert_eq!(
            c.network,
            Net::AllowHosts(vec![
                "example.org".into(),
                "chatgpt.com".into(),
                "api.openai.com".into()
            ])
        );
        assert_eq!(c.gateway_hosts(), ["chatgpt.com", "api.openai.com"]);
        assert_eq!(c.gateway_port("api.openai.com:443"), 3181);
        // A credential file alone opens the way to its host.
        let c = parse(
            r#"{"implement":["codex"],"credential_files":[{"path":"auth.json","pointers":["/key"],"host":"127.0.0.1:8080"}]}"#,
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.network, Net::AllowHosts(vec!["127.0.0.1:8080".into()]));
        // Kept out only: the network stays as it was.
        let c = parse(
            r#"{"implement":["codex"],"credential_files":[{"path":"auth.json","pointers":["/key"]}]}"#,
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.network, Net::None);
        assert!(c.gateway_hosts().is_empty());
    }

    #[test]
    fn a_bad_credential_file_entry_is_refused_by_what_is_wrong() {
        for (json, said) in [
            (
                r#"{"path":"/home/me/.codex/auth.json","pointers":["/a"]}"#,
                "not a path inside the profile",
            ),
            (
                r#"{"path":"../auth.json","pointers":["/a"]}"#,
                "not a path inside the profile",
            ),
            (
                r#"{"path":"./auth.json","pointers":["/a"]}"#,
                "not a path inside the profile",
            ),
            (
                r#"{"path":"","pointers":["/a"]}"#,
                "not a path inside the profile",
            ),
            (
                r#"{"path":"auth.json","pointers":[]}"#,
                "names no `pointers`",
            ),
            (
                r#"{"path":"auth.json","pointers":["tokens/a"]}"#,
                "not a JSON pointer",
            ),
            (
                r#"{"path":"auth.json","pointers":["/a~2b"]}"#,
                "not a JSON pointer",
            ),
            (
                r#"{"path":"auth.json","pointers":[""]}"#,
                "not a JSON pointer",
            ),
            (
                r#"{"path":"auth.json","pointers":["/a"],"header":"X-Key"}"#,
                "without a host",
            ),
            (
                r#"{"path":"auth.json","pointers":["/a"],"base_url":"URL"}"#,
                "without a host",
            ),
            (
                r#"{"path":"auth.json","pointers":["/a"],"host":"http://x"}"#,
                "is not a host",
            ),
            (
                r#"{"path":"auth.json","pointers":["/a"],"host":"x","value":"Bearer"}"#,
                "must hold {secret}",
            ),
            (
                r#"{"path":"auth.json","pointers":["/a"],"host":"x","base_url":"HOME"}"#,
                "not a free variable",
            ),
            (
                r#"{"path":"auth.json","pointers":["/a"],"variable":"V"}"#,
                "unknown field `variable`",
            ),
            (r#"{"path":"auth.json","pointers":["/a","/a"]}"#, "twice"),
        ] {
            let e = parse(
                &format!(r#"{{"implement":["a"],"credential_files":[{json}]}}"#),
                Path::new("/"),
            )
            .unwrap_err();
            assert!(e.message.contains(said), "{json}: {}", e.message);
            assert!(
                e.remedy.contains("`credential_files`"),
                "{json}: {}",
                e.remedy
            );
        }
        // The same pointer in two entries, and a base_url another credential's variable took.
        let e = parse(
            r#"{"implement":["a"],"credential_files":[{"path":"a.json","pointers":["/k"]},{"path":"a.json","pointers":["/k"],"host":"x"}]}"#,
            Path::new("/"),
        )
        .unwrap_err();
        assert!(
            e.message.contains("declare /k in a.json twice"),
            "{}",
            e.message
        );
        let e = parse(
            r#"{"implement":["a"],"credentials":[{"host":"x","from":{"env":"K"},"variable":"V"}],
                "credential_files":[{"path":"a.json","pointers":["/k"],"host":"y","base_url":"V"}]}"#,
            Path::new("/"),
        )
        .unwrap_err();
        assert!(e.message.contains("the variable V twice"), "{}", e.message);
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
