//! The stored login (`<CODEX_HOME>/auth.json`), which never enters an agent's sandbox.
//!
//! Codex CLI 0.163.0 keeps a ChatGPT login as
//! `{"OPENAI_API_KEY": null, "tokens": {"id_token", "access_token", "refresh_token",
//! "account_id"}, "last_refresh"}` (an `auth_mode` key may be there too), and an API-key
//! login as `{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-…"}`. The three tokens are
//! declared to the host (`HarnessPlugin::credentials`), which puts a stand-in in place of
//! each in every call's copy; a JSON Web Token's stand-in keeps its claims (its `exp`
//! included) and draws a new signature, so Codex reads the same expiry in there.
//!
//! Codex renews a login itself when the access token's `exp` is less than about five
//! minutes away (measured: 300 s renewed, 400 s did not), before its first request. In an
//! agent's sandbox it must never try (the OAuth host is not reachable, and it holds a
//! stand-in refresh token): [`expiry_ms`] answers the host [`RENEW_AHEAD`] before the
//! token's `exp`, so the host renews the login while a whole call plus its own margin
//! still separates `exp` from Codex's threshold.
//!
//! There is no command that only renews (`codex login status` never does): the refresh
//! launch runs `codex exec` on a copy whose access token is replaced by an expired
//! placeholder ([`copy_for_refresh`]), which makes Codex renew first; [`settle_refresh`]
//! then reads what it wrote, by shape. Nothing of an agent call's copy is carried back:
//! it holds stand-ins only.

// What this module reads was written by Codex, in a sandbox for a refresh: nothing here may
// panic on it.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::arithmetic_side_effects
    )
)]

use std::path::Path;

use serde_json::Value;
use stet_plugin_api::PluginError;

/// The login file in CODEX_HOME.
pub const FILE: &str = "auth.json";

/// The JSON pointers of the login's tokens.
pub const ACCESS_TOKEN: &str = "/tokens/access_token";
/// The ID token: read by Codex for the plan and e-mail; sent nowhere by stet.
pub const ID_TOKEN: &str = "/tokens/id_token";
/// The refresh token: sent only to the OAuth host, never from an agent's sandbox.
pub const REFRESH_TOKEN: &str = "/tokens/refresh_token";

/// Where Codex renews a login (the binary's default; `CODEX_REFRESH_TOKEN_URL_OVERRIDE`
/// moves it).
pub const OAUTH_TOKEN_URL: &str = "https://auth.openai.com/oauth/token";

/// How long before the access token's `exp` the host is told the login expires: Codex's
/// own threshold (about 5 minutes) and 5 minutes more.
pub const RENEW_AHEAD_SECS: u64 = 10 * 60;

/// The most of a login file read.
const FILE_LIMIT: u64 = 1 << 20;

/// The longest token accepted from a renewed login (a JWT of a few kilobytes).
const TOKEN_LIMIT: usize = 16 * 1024;

/// What kind of login the profile holds, read from the file's shape (never a value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// No login file, or one that holds no login.
    None,
    /// A ChatGPT login: OAuth tokens.
    ChatGpt,
    /// An API key (`auth_mode: apikey`, or a key in `OPENAI_API_KEY`): billed per token,
    /// refused like Claude's billing route.
    ApiKey,
}

/// The kind of login `profile`'s file holds. An API key anywhere in it wins: a file that
/// holds both would bill the key.
pub fn kind(profile: &Path) -> Kind {
    match read(profile) {
        Some(json) => kind_of(&json),
        None => Kind::None,
    }
}

/// [`kind`] of a parsed login file.
pub fn kind_of(json: &Value) -> Kind {
    let key = json
        .get("OPENAI_API_KEY")
        .and_then(Value::as_str)
        .is_some_and(|k| !k.is_empty());
    let mode = json.get("auth_mode").and_then(Value::as_str);
    if key || mode.is_some_and(|m| m.eq_ignore_ascii_case("apikey")) {
        return Kind::ApiKey;
    }
    if json.pointer(ACCESS_TOKEN).is_some_and(is_token) {
        return Kind::ChatGpt;
    }
    Kind::None
}

/// The keys of the login file besides the ones Codex 0.163.0 writes for a login: their
/// names, never values. A key stet does not know may hold a secret it does not declare.
pub fn unknown_keys(profile: &Path) -> Vec<String> {
    const KNOWN: [&str; 4] = ["OPENAI_API_KEY", "tokens", "last_refresh", "auth_mode"];
    const KNOWN_TOKENS: [&str; 4] = ["id_token", "access_token", "refresh_token", "account_id"];
    let Some(json) = read(profile) else {
        return Vec::new();
    };
    let mut unknown: Vec<String> = json
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|k| !KNOWN.contains(&k.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    if let Some(tokens) = json.get("tokens").and_then(Value::as_object) {
        unknown.extend(
            tokens
                .keys()
                .filter(|k| !KNOWN_TOKENS.contains(&k.as_str()))
                .map(|k| format!("tokens.{k}")),
        );
    }
    unknown
}

/// When the host should count the login as expired, in ms since the epoch:
/// [`RENEW_AHEAD_SECS`] before the access token's `exp`. 0 when there is no token or no
/// readable `exp` (nothing to renew by time).
pub fn expiry_ms(profile: &Path) -> u64 {
    read(profile)
        .and_then(|json| {
            json.pointer(ACCESS_TOKEN)
                .and_then(Value::as_str)
                .and_then(jwt_exp)
        })
        .map_or(0, |exp| {
            exp.saturating_sub(RENEW_AHEAD_SECS).saturating_mul(1000)
        })
}

/// The `exp` claim of a JSON Web Token, in seconds since the epoch: its payload decoded
/// (base64url, unpadded) and read, the signature not verified (Codex does not either).
pub fn jwt_exp(token: &str) -> Option<u64> {
    let mut parts = token.split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || payload.len() > TOKEN_LIMIT {
        return None;
    }
    let bytes = base64url(payload)?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?;
    exp.as_u64().or_else(|| {
        exp.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .map(|f| f as u64)
    })
}

/// Decodes unpadded (or padded) base64url; `None` on any other character.
// Each operation is bounded: a character's value is below 64, `bits` stays below 14 and
// `acc` below 2^14, the capacity is a slice's length over four times three.
#[allow(clippy::arithmetic_side_effects)]
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// An unsigned JSON Web Token whose `exp` is long past: what the refresh's copy holds in
/// place of the real access token, so that Codex renews the login before anything else
/// (and the real access token never enters that sandbox either).
pub const EXPIRED_PLACEHOLDER: &str =
    // {"alg":"none","typ":"JWT"} . {"exp":1,"sub":"stet-refresh-placeholder"} . "stet"
    "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJleHAiOjEsInN1YiI6InN0ZXQtcmVmcmVzaC1wbGFjZWhvbGRlciJ9.c3RldA";

/// Copies the stored login into `work_dir` for the refresh launch (mode 600), its access
/// token replaced by [`EXPIRED_PLACEHOLDER`]: only the refresh token, the ID token and the
/// account id enter that sandbox. Refused when there is no ChatGPT login with a refresh
/// token.
pub fn copy_for_refresh(profile: &Path, work_dir: &Path) -> Result<(), PluginError> {
    let mut json = stored(profile)?;
    if !json.pointer(REFRESH_TOKEN).is_some_and(is_token) {
        return Err(PluginError::invalid_input(format!(
            "the stored login in {} has no refresh token, so it cannot be renewed",
            profile.join(FILE).display()
        ))
        .with_remedy("log in again: stet profile login"));
    }
    if let Some(slot) = json.pointer_mut(ACCESS_TOKEN) {
        *slot = Value::String(EXPIRED_PLACEHOLDER.into());
    }
    let copy = work_dir.join(FILE);
    write_private(&copy, json.to_string().as_bytes(), true)
        .map_err(|e| PluginError::backend(format!("cannot write {}: {e}", copy.display())))
}

/// After the refresh launch: the login Codex renewed in `work_dir`, checked by its shape
/// (written inside a sandbox: data), put into the profile's login file in place of the old
/// tokens (the file's other keys kept), atomically. Returns the new expiry as
/// [`expiry_ms`] says it. An error, and the profile untouched, when the copy holds no new
/// login.
pub fn settle_refresh(profile: &Path, work_dir: &Path) -> Result<u64, PluginError> {
    let path = profile.join(FILE);
    let mut whole = stored(profile)?;
    let not_renewed = |why: &str| {
        PluginError::backend(format!("Codex did not renew the stored login: {why}")).with_remedy(
            "if the login was revoked or is too old, log in again (stet profile login); \
             if auth.openai.com cannot be reached from this machine, name the relay that reaches it ([network.connect_to])",
        )
    };
    let renewed = stet_plugin_support::read_untrusted(&work_dir.join(FILE), FILE_LIMIT)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
    let Some(renewed) = renewed else {
        return Err(not_renewed("it left no login file it could read"));
    };
    let token = |pointer: &str| renewed.pointer(pointer).filter(|t| is_token(t)).cloned();
    let (Some(access), Some(refresh), Some(id)) =
        (token(ACCESS_TOKEN), token(REFRESH_TOKEN), token(ID_TOKEN))
    else {
        return Err(not_renewed(
            "the login it left lacks an access, refresh or ID token",
        ));
    };
    if access.as_str() == Some(EXPIRED_PLACEHOLDER) {
        return Err(not_renewed(
            "the OAuth host refused the refresh token, or could not be reached (the access token is the placeholder it was given)",
        ));
    }
    let Some(exp) = access.as_str().and_then(jwt_exp) else {
        return Err(not_renewed("the renewed access token carries no expiry"));
    };
    let old_exp = whole
        .pointer(ACCESS_TOKEN)
        .and_then(Value::as_str)
        .and_then(jwt_exp)
        .unwrap_or(0);
    if exp <= old_exp {
        return Err(not_renewed(
            "the renewed access token expires no later than the old one",
        ));
    }
    let Some(tokens) = whole.get_mut("tokens").and_then(Value::as_object_mut) else {
        return Err(PluginError::backend(format!(
            "{} changed while the login was renewed",
            path.display()
        )));
    };
    tokens.insert("access_token".into(), access);
    tokens.insert("refresh_token".into(), refresh);
    tokens.insert("id_token".into(), id);
    if let Some(at) = renewed
        .get("last_refresh")
        .and_then(Value::as_str)
        .filter(|t| t.len() < 64 && t.bytes().all(|b| b.is_ascii_graphic()))
    {
        if let Some(object) = whole.as_object_mut() {
            object.insert("last_refresh".into(), Value::String(at.into()));
        }
    }
    write_private(&path, whole.to_string().as_bytes(), false)
        .map_err(|e| PluginError::backend(format!("cannot write {}: {e}", path.display())))?;
    Ok(exp.saturating_sub(RENEW_AHEAD_SECS).saturating_mul(1000))
}

/// The login file, parsed (read without following a link, bounded).
fn read(profile: &Path) -> Option<Value> {
    let bytes = stet_plugin_support::read_untrusted(&profile.join(FILE), FILE_LIMIT).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The stored ChatGPT login, or an error saying to log in.
fn stored(profile: &Path) -> Result<Value, PluginError> {
    let path = profile.join(FILE);
    let json = read(profile).ok_or_else(|| {
        PluginError::invalid_input(format!("there is no stored login in {}", path.display()))
            .with_remedy("log in: stet profile login")
    })?;
    if kind_of(&json) != Kind::ChatGpt {
        return Err(PluginError::invalid_input(format!(
            "{} holds no ChatGPT login",
            path.display()
        ))
        .with_remedy("log in with ChatGPT: stet profile login"));
    }
    Ok(json)
}

/// A token's shape: printable ASCII without spaces, bounded.
fn is_token(value: &Value) -> bool {
    value.as_str().is_some_and(|t| {
        !t.is_empty() && t.len() <= TOKEN_LIMIT && t.bytes().all(|b| b.is_ascii_graphic())
    })
}

/// Writes `bytes` to `path` (mode 600): a new file when `fresh`, else through a new file
/// beside it renamed over it, so that a crash leaves the old file or the new one.
fn write_private(path: &Path, bytes: &[u8], fresh: bool) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let open = |at: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(at)
    };
    if fresh {
        return open(path).and_then(|mut f| f.write_all(bytes));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let staged = dir.join(format!(".{FILE}.stet-{}", std::process::id()));
    let _ = std::fs::remove_file(&staged);
    let mut file = open(&staged)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&staged, path)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests' dummy login (tests/src/lib.rs `dummy_codex_login`): exp 4102444800.
    const ACCESS: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjQxMDI0NDQ4MDAsInN1YiI6ImR1bW15LWFjY2VzcyJ9.ZHVtbXktYWNjZXNzLXNpZ25hdHVyZS1mb3ItdGhlLWZha2UtYXBpLW9ubHktMDAwMA";
    const ID: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJlbWFpbCI6ImR1bW15QGV4YW1wbGUuaW52YWxpZCIsImV4cCI6NDEwMjQ0NDgwMH0.ZHVtbXktaWQtc2lnbmF0dXJlLWZvci10aGUtZmFrZS1hcGktb25seS0xMTEx";
    const REFRESH: &str = "rt_dummyMadeForTheFakeApiOnly0123456789abcdefABCDEF";
    /// {"exp": 1700000000, "sub": "dummy-expired"} (the facts' expired dummy).
    const EXPIRED: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOiAxNzAwMDAwMDAwLCAic3ViIjogImR1bW15LWV4cGlyZWQifQ.c2ln";

    fn login(dir: &Path, access: &str) {
        std::fs::write(
            dir.join(FILE),
            serde_json::json!({"OPENAI_API_KEY": null, "tokens": {"id_token": ID,
                "access_token": access, "refresh_token": REFRESH,
                "account_id": "00000000-0000-4000-8000-000000000000"},
                "last_refresh": "2026-01-01T00:00:00Z"})
            .to_string(),
        )
        .unwrap();
    }

    #[test]
    fn the_expiry_is_the_access_tokens_exp_less_codexs_margin_and_ours() {
        assert_eq!(jwt_exp(ACCESS), Some(4_102_444_800));
        assert_eq!(jwt_exp(EXPIRED), Some(1_700_000_000));
        assert_eq!(jwt_exp(EXPIRED_PLACEHOLDER), Some(1));
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(expiry_ms(dir.path()), 0, "no login: nothing to renew");
        login(dir.path(), ACCESS);
        assert_eq!(expiry_ms(dir.path()), (4_102_444_800 - 600) * 1000);
        assert_eq!(kind(dir.path()), Kind::ChatGpt);
        assert!(unknown_keys(dir.path()).is_empty());
    }

    #[test]
    fn hostile_tokens_read_as_no_expiry_without_a_panic() {
        for token in [
            "",
            ".",
            "..",
            "a.b.c.d",
            "eyJ.%%%.x",
            "x.bm90IGpzb24.y",
            "x.eyJleHAiOi0xfQ.y",
            "x.eyJleHAiOiJzb29uIn0.y",
            "x.eyJleHAiOjFlMzAwfQ.y",
        ] {
            let _ = jwt_exp(token);
        }
        assert_eq!(jwt_exp("x.eyJleHAiOi0xfQ.y"), None, "a negative exp");
    }

    #[test]
    fn a_key_login_is_an_api_key_whatever_else_the_file_holds() {
        let key = serde_json::json!({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-dummy"});
        assert_eq!(kind_of(&key), Kind::ApiKey);
        let both =
            serde_json::json!({"OPENAI_API_KEY": "sk-dummy", "tokens": {"access_token": ACCESS}});
        assert_eq!(kind_of(&both), Kind::ApiKey);
        let mode = serde_json::json!({"auth_mode": "apikey"});
        assert_eq!(kind_of(&mode), Kind::ApiKey);
        assert_eq!(kind_of(&serde_json::json!({"tokens": {}})), Kind::None);
        assert_eq!(kind_of(&serde_json::json!([1])), Kind::None);
    }

    #[test]
    fn the_refresh_copy_holds_an_expired_placeholder_and_the_renewed_login_comes_back() {
        let profile = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        login(profile.path(), EXPIRED);
        std::fs::write(profile.path().join("config.toml"), "x").unwrap();
        copy_for_refresh(profile.path(), work.path()).unwrap();
        let copy = std::fs::read_to_string(work.path().join(FILE)).unwrap();
        assert!(!copy.contains(EXPIRED) && copy.contains(EXPIRED_PLACEHOLDER));
        assert!(copy.contains(REFRESH));
        assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 1);
        // Nothing renewed: refused, the profile untouched.
        let e = settle_refresh(profile.path(), work.path()).unwrap_err();
        assert!(e.message.contains("placeholder"), "{}", e.message);
        // Codex's rewrite: new tokens, last_refresh now.
        let mut renewed: Value = serde_json::from_str(&copy).unwrap();
        renewed["tokens"]["access_token"] = ACCESS.into();
        renewed["tokens"]["refresh_token"] = "rt_renewed0123456789".into();
        renewed["last_refresh"] = "2026-12-04T13:00:00.123456789Z".into();
        std::fs::write(work.path().join(FILE), renewed.to_string()).unwrap();
        let expiry = settle_refresh(profile.path(), work.path()).unwrap();
        assert_eq!(expiry, (4_102_444_800 - 600) * 1000);
        let now: Value =
            serde_json::from_slice(&std::fs::read(profile.path().join(FILE)).unwrap()).unwrap();
        assert_eq!(now["tokens"]["access_token"], ACCESS);
        assert_eq!(now["tokens"]["refresh_token"], "rt_renewed0123456789");
        assert_eq!(
            now["tokens"]["account_id"],
            "00000000-0000-4000-8000-000000000000"
        );
        assert_eq!(now["last_refresh"], "2026-12-04T13:00:00.123456789Z");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(profile.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // The same login again is no renewal.
        let e = settle_refresh(profile.path(), work.path()).unwrap_err();
        assert!(e.message.contains("no later"), "{}", e.message);
    }

    #[test]
    fn a_login_without_a_refresh_token_or_a_key_login_is_not_renewed() {
        let profile = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        std::fs::write(
            profile.path().join(FILE),
            r#"{"auth_mode":"apikey","OPENAI_API_KEY":"sk-dummy"}"#,
        )
        .unwrap();
        assert!(copy_for_refresh(profile.path(), work.path())
            .unwrap_err()
            .message
            .contains("no ChatGPT login"));
        std::fs::write(
            profile.path().join(FILE),
            serde_json::json!({"tokens": {"access_token": ACCESS}}).to_string(),
        )
        .unwrap();
        assert!(copy_for_refresh(profile.path(), work.path())
            .unwrap_err()
            .message
            .contains("no refresh token"));
    }
}
