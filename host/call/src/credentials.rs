//! The credential wall: the person's login stays on the host.
//!
//! A harness declares the credentials its agent uses (`HarnessPlugin::credentials`: where
//! each is kept, the host and header its requests carry it in). For each agent call the host
//! [`seal`]s the call's fresh copy of the profile: every declared secret there is replaced by
//! a *stand-in* — random, of the same shape — and the copy is then checked to hold no real
//! secret anywhere. Inside the sandbox the agent's client reaches its model API at a gateway
//! on the sandbox's loopback ([`GATEWAY_PORT`] on), where stet's proxy swaps the real value
//! in for the stand-in on requests to the declared host only. When the call's profile is
//! dropped (its sandbox is gone) its stand-ins are revoked: any proxy of this process refuses
//! a request that carries one, saying why.
//!
//! The real values live in this process's memory for the length of a call; nothing here
//! logs, prints or writes them. What is kept longer is their [`Fingerprint`]s, for the scan of
//! a lane before it is pushed (`scan.rs`).

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Mutex, OnceLock, PoisonError};

use stet_egress::credentials::{Fingerprint, Gateway, Swap};
use stet_plugin_api::{CredentialDecl, CredentialSource, EnvVar};

pub use stet_plugin_api::GATEWAY_PORT;

use crate::error::{Concept, Error};
use crate::network::{is_loopback_name, revoked};

/// The fingerprints (and lengths) of every real credential this process has sealed away
/// (a drive's).
pub fn known() -> Vec<(Fingerprint, usize)> {
    known_set()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .copied()
        .collect()
}

fn known_set() -> &'static Mutex<HashSet<(Fingerprint, usize)>> {
    static KNOWN: OnceLock<Mutex<HashSet<(Fingerprint, usize)>>> = OnceLock::new();
    KNOWN.get_or_init(Default::default)
}

/// What the credential wall (`walls::runtime`) checks: the real credentials' fingerprints,
/// and how many requests of the proof call had one swapped in at the gateway.
pub struct CredentialCheck {
    /// The fingerprints of the credentials sealed away from the proof's sandbox.
    pub real: Vec<Fingerprint>,
    /// Whether one of them travels in a header (so the proof call's requests must have
    /// had it swapped in).
    pub swaps_expected: bool,
    /// How many of the proof call's requests came to the gateway, and how many had it.
    pub gateway: stet_egress::server::GatewayCounts,
}

/// One declared credential of one call: its real value and the stand-in the sandbox holds.
struct Held {
    id: String,
    host: String,
    header: String,
    value: String,
    real: String,
    stand_in: String,
    /// The launch variable it travels in (`CredentialSource::Environment`).
    variable: Option<String>,
}

/// The credentials of one call. Dropping it revokes its stand-ins.
#[derive(Default)]
pub struct Sealed {
    held: Vec<Held>,
    /// The profile copy it sealed.
    copy: std::path::PathBuf,
}

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.held.iter().map(|h| h.id.as_str()).collect();
        write!(f, "Sealed({ids:?})")
    }
}

/// Replaces each secret `decls` keep in the profile copy `copy` by a stand-in, then checks
/// that no file of the copy holds a real one. `whose` names the harness, for errors. A
/// declared file or value that is absent is no credential (not logged in: the harness says
/// so by its own walls).
pub fn seal(whose: &str, decls: &[CredentialDecl], copy: &Path) -> Result<Sealed, Error> {
    let mut sealed = Sealed {
        held: Vec::new(),
        copy: copy.to_path_buf(),
    };
    // (file, JSON pointer) of each secret declared in the profile.
    let mut declared: Vec<(String, String)> = Vec::new();
    for decl in decls {
        let Ok(source) = decl.source.as_enum() else {
            return Err(Concept::Credentials.failure(format!(
                "harness {whose} keeps its credential `{}` where this stet cannot keep it out of the sandbox",
                decl.id
            ))
            .hint("update stet, or use a harness version built for this one"));
        };
        // Absent (not logged in), a credential is still declared: its host is still served
        // through the gateway, so the agent's client says what is wrong itself.
        let (real, variable) = match source {
            CredentialSource::ProfileFile { path, pointer } => {
                declared.push((path.to_string(), pointer.to_string()));
                (
                    replace_in_file(copy, path.as_str(), pointer.as_str())?
                        .unwrap_or_else(StandIn::none),
                    None,
                )
            }
            // Replaced in the launch's environment by `seal_env`.
            CredentialSource::Environment { name } => (StandIn::none(), Some(name.to_string())),
            _ => continue,
        };
        sealed.held.push(Held {
            id: decl.id.to_string(),
            host: decl.host.to_string(),
            header: decl.header.to_string(),
            value: decl.value.to_string(),
            real: real.real,
            stand_in: real.stand_in,
            variable,
        });
    }
    for held in sealed.held.iter().filter(|h| !h.real.is_empty()) {
        if let Some(file) = holding(copy, &held.real) {
            return Err(Concept::Credentials.failure(format!(
                "the call's copy of the profile still holds the credential `{}` in {file}; the call is not made",
                held.id
            ))
            .hint("the harness keeps that credential somewhere it did not declare: report this to its author"));
        }
    }
    // What nobody declared would enter the sandbox as it is: a login the person keeps in the
    // profile beside the declared ones (a second agent's, an API key in a settings file).
    if let Some(found) = undeclared(copy, &declared) {
        return Err(found.refusal(whose));
    }
    sealed.remember();
    Ok(sealed)
}

/// Where in a profile file a credential shape was found.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// At this JSON pointer of a JSON file.
    Pointer(String),
    /// On this line of a file that is not JSON.
    Line(usize),
}

/// A credential shape in a call's profile copy that no declaration covers.
#[derive(Debug, PartialEq, Eq)]
struct Undeclared {
    /// Relative to the profile.
    file: String,
    place: Place,
    /// What it looks like (`a JSON Web Token`), as the pre-push scan names it.
    kind: &'static str,
}

impl Undeclared {
    /// The call refused, naming the file, the kind and what to declare (never the value).
    fn refusal(&self, whose: &str) -> Error {
        let file = &self.file;
        match &self.place {
            Place::Pointer(pointer) => Concept::Credentials.failure(format!(
                "the walled profile's {file} holds {} at {pointer}, which harness `{whose}` does not declare as a credential; the call is not made",
                self.kind
            ))
            .hint(format!(
                "declare it, with the host it is for, and stet keeps it out of the sandbox (the command harness: \
                 credential_files = [{{ path = \"{file}\", pointers = [\"{pointer}\"], host = \"api.example.com/v1\" }}] \
                 under [plugins.command]; without a host it is kept out and sent nowhere), or take it out of the walled profile"
            )),
            Place::Line(line) => Concept::Credentials.failure(format!(
                "the walled profile's {file} holds {} (line {line}), which harness `{whose}` does not declare as a credential; the call is not made",
                self.kind
            ))
            .hint(
                "stet keeps a secret out of the sandbox only at a declared JSON pointer of a JSON file: \
                 take it out of the walled profile, or keep it in a JSON file the harness declares",
            ),
        }
    }
}

/// The first credential shape (`scan::shape_of`, the pre-push scan's) in a file under `copy`
/// that is not at a `declared` (file, JSON pointer). Files are read as data: no link
/// followed, none larger than [`SEARCH_FILE_LIMIT`] (a binary, not a credential file).
fn undeclared(copy: &Path, declared: &[(String, String)]) -> Option<Undeclared> {
    let mut pending = vec![copy.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<std::fs::DirEntry> = entries.flatten().collect();
        // In the order a person reads a listing: the same file is named each time.
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for entry in entries {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            let Ok(bytes) = crate::files::read_untrusted(&path, SEARCH_FILE_LIMIT) else {
                continue;
            };
            let file = path
                .strip_prefix(copy)
                .unwrap_or(&path)
                .display()
                .to_string();
            let skip = |pointer: &str| declared.iter().any(|(f, p)| *f == file && p == pointer);
            if let Some((place, kind)) = shape_in_file(&bytes, &skip) {
                return Some(Undeclared { file, place, kind });
            }
        }
    }
    None
}

/// The first credential shape in a file's `bytes` and where: at a JSON pointer not `skip`ped
/// (a string value, seen as `"key": "value"`, as it is written), or on a line of a file that
/// is not JSON.
fn shape_in_file(bytes: &[u8], skip: &dyn Fn(&str) -> bool) -> Option<(Place, &'static str)> {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(bytes) {
        return shape_in_json(&json, String::new(), None, skip);
    }
    String::from_utf8_lossy(bytes)
        .lines()
        .enumerate()
        .find_map(|(n, line)| crate::scan::shape_of(line).map(|kind| (Place::Line(n + 1), kind)))
}

fn shape_in_json(
    value: &serde_json::Value,
    pointer: String,
    key: Option<&str>,
    skip: &dyn Fn(&str) -> bool,
) -> Option<(Place, &'static str)> {
    use serde_json::Value;
    if skip(&pointer) {
        return None;
    }
    match value {
        Value::String(text) => {
            let quoted = Value::from(text.as_str()).to_string();
            let written = match key {
                Some(key) => format!("{}: {quoted}", Value::from(key)),
                None => quoted,
            };
            crate::scan::shape_of(&written).map(|kind| (Place::Pointer(pointer), kind))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| shape_in_json(item, format!("{pointer}/{i}"), None, skip)),
        Value::Object(map) => map.iter().find_map(|(k, item)| {
            let escaped = k.replace('~', "~0").replace('/', "~1");
            shape_in_json(item, format!("{pointer}/{escaped}"), Some(k), skip)
        }),
        _ => None,
    }
}

/// A real value and its stand-in.
struct StandIn {
    real: String,
    stand_in: String,
}

impl StandIn {
    fn of(real: String) -> StandIn {
        StandIn {
            stand_in: stand_in(&real),
            real,
        }
    }

    fn none() -> StandIn {
        StandIn {
            real: String::new(),
            stand_in: String::new(),
        }
    }
}

/// The shortest real value looked for in a prompt: 16 bytes, shorter than any login or
/// API key a harness declares, longer than words a prompt holds by chance.
pub const PROMPT_SCAN_MIN: usize = 16;

impl Sealed {
    /// Puts stand-ins in place of the secrets in the launch's environment (credentials
    /// kept in a variable), and refuses an environment that still holds a real one.
    pub fn seal_env(&mut self, env: &mut [EnvVar]) -> Result<(), Error> {
        // A variable twice would leave the second copy as it is (and runtimes let the last
        // one win): refused.
        for held in self.held.iter().filter_map(|h| h.variable.as_deref()) {
            if env.iter().filter(|v| v.name.as_str() == held).count() > 1 {
                return Err(Concept::Credentials.failure(format!(
                    "the agent's environment sets {held}, which holds a credential, more than once; the call is not made"
                ))
                .hint("give each credential its own variable"));
            }
        }
        for held in self.held.iter_mut().filter(|h| h.variable.is_some()) {
            let name = held.variable.as_deref().unwrap_or_default();
            if let Some(var) = env.iter_mut().find(|v| v.name.as_str() == name) {
                // Sealed once per call: a second launch of the call (the proof's walls)
                // gets the same stand-in.
                if held.real.is_empty() {
                    held.real = var.value.to_string();
                    held.stand_in = stand_in(&held.real);
                }
                if var.value.as_str() == held.real {
                    var.value = held.stand_in.clone().into();
                } else if var.value.as_str() != held.stand_in {
                    // Another value than the one this call was sealed with (the credential
                    // was replaced meanwhile): no stand-in stands for it.
                    return Err(Concept::Credentials.failure(format!(
                        "the agent's environment sets {name}, which holds the credential `{}`, to another value than the one this call was sealed with; the call is not made",
                        held.id
                    ))
                    .hint("the credential changed while the call was being made ready; the next call reads it afresh"));
                }
            }
        }
        self.remember();
        for var in env.iter() {
            if let Some(held) = self
                .held
                .iter()
                .find(|h| !h.real.is_empty() && var.value.as_str().contains(h.real.as_str()))
            {
                return Err(Concept::Credentials.failure(format!(
                    "the agent's environment holds the credential `{}` in {}; the call is not made",
                    held.id, var.name
                ))
                .hint("the harness passes that credential somewhere it did not declare: report this to its author"));
            }
        }
        Ok(())
    }

    /// After [`Sealed::seal_env`]: no real value in the launch's arguments, its prompt
    /// ([`Sealed::check_prompt`]), the profile copy (a value first learned from a variable),
    /// or what the launch mounts (files and directories; files over 8 MiB are not read —
    /// binaries, not credentials). Only the prompt's refusal is the item's
    /// ([`Kind::Refused`]); the others are the harness's or the set-up's, as every call of
    /// the drive would meet them.
    ///
    /// [`Kind::Refused`]: crate::error::Kind::Refused
    pub fn check_launch(
        &self,
        process: &stet_plugin_api::ProcessSpec,
        mounts: &[stet_plugin_api::Mount],
    ) -> Result<(), Error> {
        self.check_prompt(&process.stdin)?;
        let refuse = |held: &Held, place: String| {
            Err(Concept::Credentials.failure(format!(
                "the credential `{}` would enter the sandbox in {place}; the call is not made",
                held.id
            ))
            .hint("keep the credential out of the agent's arguments and mounts: declare it, or move it"))
        };
        for held in self.held.iter().filter(|h| !h.real.is_empty()) {
            if process
                .argv
                .iter()
                .any(|a| a.as_str().contains(held.real.as_str()))
            {
                return refuse(held, "the agent's arguments".into());
            }
            if held.variable.is_some() {
                if let Some(file) = holding(&self.copy, &held.real) {
                    return refuse(held, format!("the profile copy's {file}"));
                }
            }
            for mount in mounts {
                let source = Path::new(mount.source.as_str());
                if source.starts_with(&self.copy) {
                    continue;
                }
                if let Some(file) = holding(source, &held.real) {
                    let place = if file.is_empty() {
                        source.display().to_string()
                    } else {
                        source.join(file).display().to_string()
                    };
                    return refuse(held, format!("the mount {place}"));
                }
            }
        }
        Ok(())
    }

    /// No real value known so far in `prompt` (the item's words, feedback, a diff: what
    /// the call's standard input carries), refused as [`Kind::Refused`], the item's: its
    /// next round would carry the same. A value shorter than [`PROMPT_SCAN_MIN`] bytes is
    /// not looked for there (ordinary words would match it; such a value is no login's).
    ///
    /// [`Kind::Refused`]: crate::error::Kind::Refused
    pub fn check_prompt(&self, prompt: &[u8]) -> Result<(), Error> {
        for held in self.held.iter().filter(|h| h.real.len() >= PROMPT_SCAN_MIN) {
            let real = held.real.as_bytes();
            if prompt.windows(real.len()).any(|w| w == real) {
                return Err(Concept::Credentials
                    .refused(format!(
                        "the credential `{}` would enter the sandbox in the agent's prompt; the call is not made",
                        held.id
                    ))
                    .hint("take the credential out of the work item (its text, or what a round hands on), then stet retry it"));
            }
        }
        Ok(())
    }

    /// The gateways the call's proxy serves: one per declared host whose credential travels
    /// in a header, at [`GATEWAY_PORT`] on in declaration order.
    pub fn gateways(&self) -> Vec<Gateway> {
        let mut gateways: Vec<Gateway> = Vec::new();
        for held in self.held.iter().filter(|h| !h.header.is_empty()) {
            // `host[:port][/path-prefix]`: the paths the credential is for.
            let (authority, path) = match held.host.find('/') {
                Some(i) => (&held.host[..i], Some(held.host[i..].to_string())),
                None => (held.host.as_str(), None),
            };
            let (host, port) = split_host(authority);
            let swaps: Vec<Swap> = (!held.real.is_empty())
                .then(|| Swap {
                    header: held.header.to_ascii_lowercase(),
                    stand_in: held.value.replace("{secret}", &held.stand_in),
                    real: held.value.replace("{secret}", &held.real),
                    // Swapped in on its own paths only, whatever else its gateway serves.
                    paths: path.iter().cloned().collect(),
                })
                .into_iter()
                .collect();
            match gateways
                .iter_mut()
                .find(|g| g.host == host && g.upstream_port == port)
            {
                Some(gateway) => {
                    gateway.swaps.extend(swaps);
                    // One credential for every path widens it to every path.
                    match path {
                        Some(path) if !gateway.paths.is_empty() => gateway.paths.push(path),
                        _ => gateway.paths.clear(),
                    }
                }
                None => gateways.push(Gateway {
                    port: GATEWAY_PORT + gateways.len() as u16,
                    tls: !is_loopback_name(&host),
                    host,
                    upstream_port: port,
                    paths: path.into_iter().collect(),
                    swaps,
                }),
            }
        }
        gateways
    }

    /// What the credential wall checks for this call: the real values' fingerprints, and
    /// whether one travels in a header (`None` when nothing was sealed).
    pub fn check(&self, gateway: stet_egress::server::GatewayCounts) -> Option<CredentialCheck> {
        let real: Vec<Fingerprint> = self
            .held
            .iter()
            .filter(|h| !h.real.is_empty())
            .map(|h| Fingerprint::of(&h.real))
            .collect();
        (!real.is_empty()).then(|| CredentialCheck {
            real,
            swaps_expected: self
                .held
                .iter()
                .any(|h| !h.real.is_empty() && !h.header.is_empty()),
            gateway,
        })
    }

    /// The launch variables that hold stand-ins (declared `Environment` credentials).
    pub fn variables(&self) -> Vec<String> {
        self.held
            .iter()
            .filter_map(|h| h.variable.clone())
            .collect()
    }

    fn remember(&self) {
        let mut known = known_set().lock().unwrap_or_else(PoisonError::into_inner);
        known.extend(
            self.held
                .iter()
                .filter(|h| !h.real.is_empty())
                .map(|h| (Fingerprint::of(&h.real), h.real.len())),
        );
    }
}

impl Drop for Sealed {
    fn drop(&mut self) {
        for held in self.held.iter().filter(|h| !h.stand_in.is_empty()) {
            revoked().revoke(&held.stand_in);
        }
    }
}

/// Reads the string at `pointer` in the JSON file `relative` of the profile copy `copy`,
/// puts a stand-in there, writes the file back (its mode kept). `None` when the file or the
/// value is absent. The file is read as data (no link followed, bounded), and nothing is
/// written through a link: the file and every directory on its way must be plain.
fn replace_in_file(copy: &Path, relative: &str, pointer: &str) -> Result<Option<StandIn>, Error> {
    let file = copy.join(relative);
    let cannot = |doing: &str, e: String| {
        Concept::Credentials
            .failure(format!(
                "cannot {doing} the profile's {relative} to keep the credential out of the sandbox"
            ))
            .caused_by(e)
    };
    let parts: Vec<std::path::Component> = Path::new(relative).components().collect();
    if parts.is_empty()
        || !parts
            .iter()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
    {
        return Err(Concept::Credentials.failure(format!(
            "the harness declares a credential in `{relative}`, which is not a path inside its profile; the call is not made"
        ))
        .hint("report this to the harness's author"));
    }
    let mut on_the_way = copy.to_path_buf();
    for part in &parts[..parts.len() - 1] {
        on_the_way.push(part);
        match std::fs::symlink_metadata(&on_the_way) {
            Ok(meta) if meta.file_type().is_symlink() || !meta.is_dir() => {
                // Written through, a link would put stand-ins into whatever it names (the
                // person's own login elsewhere).
                return Err(Concept::Credentials.failure(format!(
                    "the profile's {relative} lies under {}, which is not a plain directory; stet writes stand-ins only into a copy it owns",
                    on_the_way.strip_prefix(copy).unwrap_or(&on_the_way).display()
                ))
                .hint("replace the link in the walled profile by the directory itself"));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(cannot("read", e.to_string())),
        }
    }
    match std::fs::symlink_metadata(&file) {
        Ok(meta) if meta.file_type().is_symlink() || !meta.is_file() => {
            return Err(Concept::Credentials.failure(format!(
                "the profile's {relative} is not a plain file; stet writes stand-ins only into a copy it owns"
            ))
            .hint("replace the link in the walled profile by the file itself"));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(cannot("read", e.to_string())),
    }
    let bytes = crate::files::read_untrusted(&file, SEARCH_FILE_LIMIT)
        .map_err(|e| cannot("read", e.to_string()))?;
    let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        // Its secret cannot be found where declared, so it cannot be kept out: no call.
        return Err(Concept::Credentials.failure(format!(
            "the profile's {relative} is not JSON, so the credential declared in it cannot be kept out of the sandbox; the call is not made"
        ))
        .hint("log in again (the file is the agent's own), or remove the file"));
    };
    let Some(slot) = json.pointer_mut(pointer) else {
        return Ok(None);
    };
    if slot.is_object() || slot.is_array() {
        // Whatever secrets it holds would enter the sandbox as they are.
        return Err(Concept::Credentials.failure(format!(
            "the profile's {relative} holds {} at {pointer}, where a credential is declared: a credential is one string; the call is not made",
            if slot.is_object() { "an object" } else { "an array" }
        ))
        .hint("declare the pointer of each secret inside it"));
    }
    let Some(real) = slot.as_str().map(str::to_owned).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let pair = StandIn::of(real);
    *slot = serde_json::Value::String(pair.stand_in.clone());
    let text = serde_json::to_vec(&json).map_err(|e| cannot("write", e.to_string()))?;
    // A new file renamed over the old: nothing is written through whatever was there.
    let fresh = file.with_extension("stet-stand-in");
    std::fs::write(&fresh, text)
        .and_then(|()| std::fs::rename(&fresh, &file))
        .map_err(|e| cannot("write", e.to_string()))?;
    Ok(Some(pair))
}

/// Files larger than this are not searched (a binary, not a credential file).
const SEARCH_FILE_LIMIT: u64 = 8 << 20;

/// The first file at or under `at` (relative; empty for `at` itself) whose bytes contain
/// `secret`. Links are not followed.
fn holding(at: &Path, secret: &str) -> Option<String> {
    let holds = |path: &Path| {
        std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() <= SEARCH_FILE_LIMIT)
            && crate::files::read_untrusted(path, SEARCH_FILE_LIMIT)
                .is_ok_and(|bytes| bytes.windows(secret.len()).any(|w| w == secret.as_bytes()))
    };
    if !std::fs::symlink_metadata(at).is_ok_and(|m| m.is_dir()) {
        return holds(at).then(String::new);
    }
    let mut stack = vec![at.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && holds(&path) {
                let shown = path.strip_prefix(at).unwrap_or(&path);
                return Some(shown.display().to_string());
            }
        }
    }
    None
}

/// A random value of `real`'s shape: its lowercase prefix kept (`sk-ant-oat01-`), the rest
/// as long and of the same kinds of characters, drawn afresh.
pub fn stand_in(real: &str) -> String {
    // A JSON Web Token's header and claims are no secret (anyone holding it reads them, and
    // its client does: expiry, account); its signature is what makes it worth anything, and
    // is drawn afresh. No server accepts the result.
    if let Some((signed, signature)) = jwt(real) {
        return format!("{signed}.{}", random_like(signature));
    }
    let prefix = shape_prefix(real);
    format!("{prefix}{}", random_like(&real[prefix.len()..]))
}

/// A JSON Web Token's signed part (`header.claims`) and its signature, when `text` is one.
fn jwt(text: &str) -> Option<(&str, &str)> {
    let (signed, signature) = text.rsplit_once('.')?;
    let (header, claims) = signed.split_once('.')?;
    let base64url = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (header.starts_with("eyJ") && base64url(header) && base64url(claims) && base64url(signature))
        .then_some((signed, signature))
}

/// A random string as long as `rest`, of the kinds of characters it holds.
fn random_like(rest: &str) -> String {
    let mut alphabet: Vec<u8> = Vec::new();
    let has = |f: fn(&u8) -> bool| rest.as_bytes().iter().any(f);
    if has(u8::is_ascii_lowercase) || rest.is_empty() {
        alphabet.extend(b'a'..=b'z');
    }
    if has(u8::is_ascii_uppercase) {
        alphabet.extend(b'A'..=b'Z');
    }
    if has(u8::is_ascii_digit) || alphabet.is_empty() {
        alphabet.extend(b'0'..=b'9');
    }
    for special in [b'-', b'_'] {
        if rest.as_bytes().contains(&special) {
            alphabet.push(special);
        }
    }
    // Exactly as long: the gateway can put the stand-in back where an answer echoes the
    // real value without changing its framing.
    let length = rest.chars().count();
    let mut random = vec![0u8; length];
    // The stand-in is worth nothing outside its sandbox's proxy, but it must not be
    // guessable from another sandbox: drawn from the operating system.
    getrandom::fill(&mut random).expect("the operating system's random source");
    random
        .iter()
        .map(|b| alphabet[*b as usize % alphabet.len()] as char)
        .collect()
}

/// The vendor prefixes a stand-in keeps (what tools recognise a credential's kind by).
/// Nothing else of the real value is kept: a prefix of an arbitrary secret is part of it.
const KNOWN_PREFIXES: [&str; 13] = [
    "sk-ant-oat01-",
    "sk-ant-ort01-",
    "sk-ant-api03-",
    "sk-ant-admin01-",
    "sk-proj-",
    "sk-svcacct-",
    "sk-",
    "github_pat_",
    "ghp_",
    "gho_",
    "ghs_",
    "glpat-",
    // An OpenAI refresh token (Codex CLI's login).
    "rt_",
];

/// `sk-ant-oat01-` of `sk-ant-oat01-…`: the longest known vendor prefix, else nothing.
fn shape_prefix(real: &str) -> &str {
    KNOWN_PREFIXES
        .iter()
        .filter(|p| real.len() > p.len() && real.starts_with(*p))
        .max_by_key(|p| p.len())
        .map_or("", |p| &real[..p.len()])
}

/// `host:port` (443 when no port is given).
fn split_host(host: &str) -> (String, u16) {
    if let Some((name, port)) = host.rsplit_once(':') {
        if let Ok(port) = port.parse::<u16>() {
            if !name.is_empty() && (!name.contains(':') || name.ends_with(']')) {
                return (
                    name.trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_string(),
                    port,
                );
            }
        }
    }
    (
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        443,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use stet_plugin_api::CredentialSource_NE;

    const REAL: &str = "sk-ant-oat01-Abc_def-GHIjkl0123456789abcdefABCDEF";

    fn decl(pointer: &str, header: &str) -> CredentialDecl {
        CredentialDecl {
            id: "login".into(),
            source: CredentialSource_NE::new(CredentialSource::ProfileFile {
                path: ".credentials.json".into(),
                pointer: pointer.into(),
            }),
            host: "127.0.0.1:4242".into(),
            header: header.into(),
            value: "Bearer {secret}".into(),
        }
    }

    #[test]
    fn a_stand_in_has_the_shape_of_the_real_value_and_none_of_it() {
        let one = stand_in(REAL);
        assert!(one.starts_with("sk-ant-oat01-"), "{one}");
        assert_eq!(one.len(), REAL.len());
        assert_ne!(one, REAL);
        assert_ne!(one, stand_in(REAL), "drawn afresh each time");
        assert_eq!(shape_prefix("abcdef0123456789"), "");
        assert_eq!(shape_prefix("ghp_ABCDEF"), "ghp_");
        // A prefix of an arbitrary secret is part of the secret: none is kept.
        assert_eq!(shape_prefix("1b4e28ba-2fa1-11d2-883f-0016d3cca427"), "");
        assert_eq!(shape_prefix("correct-horse-battery-staple"), "");
        assert_eq!(stand_in("x").len(), 1, "as long as the real value, always");
    }

    #[test]
    fn sealing_replaces_the_declared_secrets_and_serves_the_host_through_a_gateway() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".credentials.json");
        std::fs::write(
            &file,
            format!(
                r#"{{"claudeAiOauth":{{"accessToken":"{REAL}","refreshToken":"sk-ant-ort01-refreshrefreshrefreshrefresh","expiresAt":1}}}}"#
            ),
        )
        .unwrap();
        let sealed = seal(
            "claude",
            &[
                decl("/claudeAiOauth/accessToken", "Authorization"),
                decl("/claudeAiOauth/refreshToken", ""),
            ],
            dir.path(),
        )
        .unwrap();
        let now = std::fs::read_to_string(&file).unwrap();
        assert!(
            !now.contains(REAL) && !now.contains("refreshrefresh"),
            "{now}"
        );
        assert!(now.contains("\"expiresAt\":1"), "the rest is kept: {now}");
        let gateways = sealed.gateways();
        assert_eq!(gateways.len(), 1, "the refresh token travels in no header");
        let gateway = &gateways[0];
        assert_eq!(
            (
                gateway.port,
                gateway.host.as_str(),
                gateway.upstream_port,
                gateway.tls
            ),
            (GATEWAY_PORT, "127.0.0.1", 4242, false)
        );
        assert_eq!(gateway.swaps[0].real, format!("Bearer {REAL}"));
        let stand_in = gateway.swaps[0]
            .stand_in
            .trim_start_matches("Bearer ")
            .to_string();
        assert!(now.contains(&stand_in));
        assert!(known().contains(&(Fingerprint::of(REAL), REAL.len())));
        // The sandbox is gone: its stand-in is revoked.
        assert!(!revoked().carried_by(&stand_in));
        drop(sealed);
        assert!(revoked().carried_by(&stand_in));
    }

    #[test]
    fn a_real_secret_left_anywhere_in_the_copy_stops_the_call() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".credentials.json"),
            format!(r#"{{"claudeAiOauth":{{"accessToken":"{REAL}"}}}}"#),
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("backups")).unwrap();
        std::fs::write(dir.path().join("backups/old.json"), REAL).unwrap();
        let e = seal(
            "claude",
            &[decl("/claudeAiOauth/accessToken", "Authorization")],
            dir.path(),
        )
        .unwrap_err();
        assert!(e.message.contains("backups/old.json"), "{}", e.message);
        assert!(!e.message.contains(REAL));
    }

    #[test]
    fn nothing_declared_or_nothing_there_seals_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let sealed = seal(
            "claude",
            &[decl("/claudeAiOauth/accessToken", "Authorization")],
            dir.path(),
        )
        .unwrap();
        // Not logged in: the host is still served, with nothing to swap.
        let gateways = sealed.gateways();
        assert_eq!(gateways.len(), 1);
        assert!(gateways[0].swaps.is_empty());
        assert!(sealed.check(Default::default()).is_none());
        assert!(seal("claude", &[], dir.path())
            .unwrap()
            .gateways()
            .is_empty());
    }

    #[test]
    fn a_real_value_in_the_arguments_the_prompt_or_a_mount_stops_the_call_and_only_the_prompts_is_the_items(
    ) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".credentials.json"),
            format!(r#"{{"claudeAiOauth":{{"accessToken":"{REAL}"}}}}"#),
        )
        .unwrap();
        let sealed = seal(
            "claude",
            &[decl("/claudeAiOauth/accessToken", "Authorization")],
            dir.path(),
        )
        .unwrap();
        let process = |arg: &str, stdin: &str| stet_plugin_api::ProcessSpec {
            argv: vec![stet_plugin_api::RString::from(arg)].into(),
            env: Default::default(),
            workdir: stet_plugin_api::ROption::RNone,
            stdin: stdin.as_bytes().to_vec().into(),
        };
        assert!(sealed
            .check_launch(&process("agent", "a prompt"), &[])
            .is_ok());
        // The prompt is the item's; the arguments are the harness's.
        for (launch, place, kind) in [
            (
                process(&format!("--token={REAL}"), ""),
                "the agent's arguments",
                crate::error::Kind::Failure,
            ),
            (
                process("agent", &format!("use the key {REAL} to call it")),
                "the agent's prompt",
                crate::error::Kind::Refused,
            ),
        ] {
            let e = sealed.check_launch(&launch, &[]).unwrap_err();
            assert!(e.message.contains(place), "{}", e.message);
            assert_eq!(e.kind, kind, "{e}");
            assert!(!e.to_string().contains(REAL));
        }
        // A value too short to be a login's is not looked for in a prompt: words would
        // match it.
        let short = tempfile::tempdir().unwrap();
        std::fs::write(
            short.path().join(".credentials.json"),
            r#"{"claudeAiOauth":{"accessToken":"the-code"}}"#,
        )
        .unwrap();
        let short = seal(
            "claude",
            &[decl("/claudeAiOauth/accessToken", "Authorization")],
            short.path(),
        )
        .unwrap();
        assert!(short.check_prompt(b"fix the-code in main.rs").is_ok());
        let elsewhere = tempfile::tempdir().unwrap();
        let token = elsewhere.path().join("token");
        std::fs::write(&token, REAL).unwrap();
        let mount = |source: &Path| stet_plugin_api::Mount {
            source: source.display().to_string().into(),
            target: "/x".into(),
            writable: false,
        };
        for source in [token.as_path(), elsewhere.path()] {
            let e = sealed
                .check_launch(&process("agent", ""), &[mount(source)])
                .unwrap_err();
            assert!(e.message.contains("the mount"), "{}", e.message);
            assert_eq!(e.kind, crate::error::Kind::Failure, "{e}");
            assert!(!e.message.contains(REAL));
        }
    }

    #[test]
    fn a_credential_variable_changed_since_the_call_was_sealed_stops_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let decl = CredentialDecl {
            id: "token".into(),
            source: CredentialSource_NE::new(CredentialSource::Environment {
                name: "API_TOKEN".into(),
            }),
            host: "127.0.0.1:4242".into(),
            header: "Authorization".into(),
            value: "Bearer {secret}".into(),
        };
        let mut sealed = seal("harness", &[decl], dir.path()).unwrap();
        let mut first = vec![EnvVar::new("API_TOKEN", REAL)];
        sealed.seal_env(&mut first).unwrap();
        assert_ne!(first[0].value.as_str(), REAL);
        // The same call launched again (a proof's second launch): the same stand-in.
        let mut again = vec![EnvVar::new("API_TOKEN", REAL)];
        sealed.seal_env(&mut again).unwrap();
        assert_eq!(again, first);
        // The credential replaced since: no stand-in stands for the new value.
        let rotated = "sk-ant-oat01-Zyx_wvu-TSRqpo9876543210zyxwvuZYXWVU";
        let mut later = vec![EnvVar::new("API_TOKEN", rotated)];
        let refused = sealed.seal_env(&mut later).unwrap_err().to_string();
        assert!(
            refused.contains("another value than the one this call was sealed with"),
            "{refused}"
        );
        assert!(
            !refused.contains(rotated) && !refused.contains(REAL),
            "{refused}"
        );
    }

    /// A JSON Web Token of dummy claims and a dummy signature (the shape Codex's access and
    /// ID tokens have).
    const JWT: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjQxMDI0NDQ4MDAsInN1YiI6ImR1bW15In0.ZHVtbXktc2lnbmF0dXJlLW1hZGUtZm9yLXRlc3RzLW9ubHktMDAwMA";

    /// Another, for the ID token.
    const ID_JWT: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJlbWFpbCI6ImR1bW15QGV4YW1wbGUuaW52YWxpZCJ9.aWQtdG9rZW4tc2lnbmF0dXJlLW1hZGUtZm9yLXRlc3RzLW9ubHktMQ";

    fn codex_login(dir: &Path) {
        std::fs::create_dir_all(dir.join(".codex")).unwrap();
        std::fs::write(
            dir.join(".codex/auth.json"),
            // (Keys in order, as serde_json keeps them with or without `preserve_order`.)
            serde_json::json!({"OPENAI_API_KEY": null, "last_refresh": "2026-01-01T00:00:00Z",
                "tokens": {"access_token": JWT,
                "account_id": "00000000-0000-0000-0000-000000000000", "id_token": ID_JWT,
                "refresh_token": "rt_dummyRefreshToken0123456789abcdef"}})
            .to_string(),
        )
        .unwrap();
    }

    fn in_file(path: &str, pointer: &str, host: &str) -> CredentialDecl {
        CredentialDecl {
            id: format!("{path}#{pointer}").into(),
            source: CredentialSource_NE::new(CredentialSource::ProfileFile {
                path: path.into(),
                pointer: pointer.into(),
            }),
            host: host.into(),
            header: if host.is_empty() { "" } else { "Authorization" }.into(),
            value: if host.is_empty() {
                ""
            } else {
                "Bearer {secret}"
            }
            .into(),
        }
    }

    #[test]
    fn a_json_web_tokens_stand_in_keeps_its_claims_and_draws_its_signature() {
        let one = stand_in(JWT);
        let (signed, signature) = JWT.rsplit_once('.').unwrap();
        assert_eq!(one.len(), JWT.len());
        assert!(one.starts_with(&format!("{signed}.")), "{one}");
        assert_ne!(one.rsplit_once('.').unwrap().1, signature);
        assert!(
            crate::scan::shape_of(&one).is_some(),
            "still a token's shape"
        );
        // Not a token: dots are not kept.
        assert!(!stand_in("abc.def.ghi").contains('.'));
    }

    #[test]
    fn a_login_file_deep_in_the_profile_is_sealed_at_each_declared_pointer() {
        let dir = tempfile::tempdir().unwrap();
        codex_login(dir.path());
        let decls = [
            in_file(
                ".codex/auth.json",
                "/tokens/access_token",
                "chatgpt.example/backend-api/codex",
            ),
            in_file(".codex/auth.json", "/tokens/id_token", ""),
            in_file(".codex/auth.json", "/tokens/refresh_token", ""),
            in_file(".codex/auth.json", "/OPENAI_API_KEY", "api.example/v1"),
        ];
        let sealed = seal("command", &decls, dir.path()).unwrap();
        let now = std::fs::read_to_string(dir.path().join(".codex/auth.json")).unwrap();
        assert!(
            !now.contains(JWT) && !now.contains(ID_JWT) && !now.contains("rt_dummyRefresh"),
            "{now}"
        );
        let json: serde_json::Value = serde_json::from_str(&now).unwrap();
        assert_eq!(
            json["OPENAI_API_KEY"],
            serde_json::Value::Null,
            "absent: kept"
        );
        assert_eq!(
            json["tokens"]["account_id"],
            "00000000-0000-0000-0000-000000000000"
        );
        // One gateway, for the host a secret of the file travels to; its swap there only.
        let gateways = sealed.gateways();
        assert_eq!(gateways.len(), 2, "{gateways:?}");
        assert_eq!(gateways[0].host, "chatgpt.example");
        assert_eq!(gateways[0].paths, ["/backend-api/codex"]);
        assert_eq!(gateways[0].swaps.len(), 1);
        assert_eq!(gateways[0].swaps[0].paths, ["/backend-api/codex"]);
        assert_eq!(gateways[0].swaps[0].real, format!("Bearer {JWT}"));
        let stand_in = json["tokens"]["access_token"].as_str().unwrap();
        assert_eq!(gateways[0].swaps[0].stand_in, format!("Bearer {stand_in}"));
        assert!(gateways[1].swaps.is_empty(), "no API key in the file");
    }

    #[test]
    fn a_credential_shape_nobody_declared_refuses_the_call_by_file_kind_and_pointer() {
        let dir = tempfile::tempdir().unwrap();
        codex_login(dir.path());
        // Nothing declared: the first shape found, by its pointer.
        let e = seal("command", &[], dir.path()).unwrap_err();
        let said = format!("{}\n{}", e.message, e.hint.clone().unwrap_or_default());
        assert!(
            said.contains("the walled profile's .codex/auth.json holds a JSON Web Token at /tokens/access_token, which harness `command` does not declare"),
            "{said}"
        );
        assert!(
            said.contains(r#"credential_files = [{ path = ".codex/auth.json", pointers = ["/tokens/access_token"]"#),
            "{said}"
        );
        assert!(!said.contains(JWT) && !said.contains("rt_dummy"), "{said}");
        // The access token declared: the next one nobody declared is named.
        let access = in_file(
            ".codex/auth.json",
            "/tokens/access_token",
            "chatgpt.example",
        );
        let e = seal("command", std::slice::from_ref(&access), dir.path()).unwrap_err();
        assert!(
            e.message.contains("a JSON Web Token at /tokens/id_token"),
            "{}",
            e.message
        );
        let id = in_file(".codex/auth.json", "/tokens/id_token", "");
        let e = seal("command", &[access.clone(), id.clone()], dir.path()).unwrap_err();
        assert!(
            e.message
                .contains("an OAuth token at /tokens/refresh_token"),
            "{}",
            e.message
        );
        // Every one declared: sealed.
        let dir = tempfile::tempdir().unwrap();
        codex_login(dir.path());
        let refresh = in_file(".codex/auth.json", "/tokens/refresh_token", "");
        seal(
            "command",
            &[access.clone(), id, refresh.clone()],
            dir.path(),
        )
        .unwrap();
        // A key in a file that is not JSON: by its line.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".config/tool")).unwrap();
        std::fs::write(
            dir.path().join(".config/tool/env"),
            "MODEL=small\nOPENAI_API_KEY=sk-proj-DUMMYdummyDUMMYdummyDUMMYdummy0123\n",
        )
        .unwrap();
        let e = seal("command", &[], dir.path()).unwrap_err();
        assert!(
            e.message
                .contains("the walled profile's .config/tool/env holds an OpenAI key (line 2)"),
            "{}",
            e.message
        );
        assert!(!e.message.contains("DUMMYdummy"));
        // Nothing of a credential's shape: nothing to say.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "model = \"small\"\n").unwrap();
        seal("command", &[], dir.path()).unwrap();
    }

    #[test]
    fn a_declared_file_behind_a_link_or_an_object_at_a_pointer_stops_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        codex_login(elsewhere.path());
        let before = std::fs::read(elsewhere.path().join(".codex/auth.json")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join(".codex"), dir.path().join(".codex"))
            .unwrap();
        let access = in_file(
            ".codex/auth.json",
            "/tokens/access_token",
            "chatgpt.example",
        );
        let e = seal("command", std::slice::from_ref(&access), dir.path()).unwrap_err();
        assert!(
            e.message
                .contains("lies under .codex, which is not a plain directory"),
            "{}",
            e.message
        );
        assert_eq!(
            std::fs::read(elsewhere.path().join(".codex/auth.json")).unwrap(),
            before,
            "nothing written through the link"
        );
        let dir = tempfile::tempdir().unwrap();
        codex_login(dir.path());
        let e = seal(
            "command",
            &[in_file(".codex/auth.json", "/tokens", "chatgpt.example")],
            dir.path(),
        )
        .unwrap_err();
        assert!(
            e.message.contains("holds an object at /tokens"),
            "{}",
            e.message
        );
        let e = seal(
            "command",
            &[in_file("../outside.json", "/x", "chatgpt.example")],
            dir.path(),
        )
        .unwrap_err();
        assert!(
            e.message.contains("not a path inside its profile"),
            "{}",
            e.message
        );
    }

    #[test]
    fn hosts_split_with_their_port_or_443() {
        assert_eq!(
            split_host("api.anthropic.com"),
            ("api.anthropic.com".into(), 443)
        );
        assert_eq!(split_host("127.0.0.1:8080"), ("127.0.0.1".into(), 8080));
        assert_eq!(split_host("[::1]:8080"), ("::1".into(), 8080));
    }
}
