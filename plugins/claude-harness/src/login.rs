//! The stored login, which never enters a sandbox.
//!
//! Claude Code keeps its login in the profile's `.credentials.json`
//! (`claudeAiOauth.accessToken`, `.refreshToken`, `.expiresAt`, …). Both tokens are declared
//! to the host (`HarnessPlugin::credentials`), which puts a random stand-in in place of each
//! in every call's copy of the profile; the access token's requests go to the model API
//! through the host's gateway, where the real one is swapped in. Nothing of a call's copy is
//! carried back: the copy holds stand-ins only, and what the agent writes there is its own.
//! Keeping the real login fresh is the host's side (the CLI with a future expiry never
//! refreshes; with a past one it tries the OAuth host, which an agent's sandbox cannot
//! reach): when it would expire before a call could end, the host runs [`crate::launch::refresh`]
//! on a copy of this file alone ([`copy_for_refresh`]) and [`settle_refresh`] puts the
//! renewed login back. stet itself never speaks the OAuth protocol.

/// Where Claude Code keeps its stored login in the profile.
pub const FILE: &str = ".credentials.json";

/// The JSON pointer of the access token, sent as a bearer to the model API.
pub const ACCESS_TOKEN: &str = "/claudeAiOauth/accessToken";

/// The JSON pointer of the refresh token, sent only to the OAuth host (never by a sandbox).
pub const REFRESH_TOKEN: &str = "/claudeAiOauth/refreshToken";

/// The OAuth host Claude Code refreshes a login at (measured with 2.1.332).
pub const OAUTH_HOST: &str = "platform.claude.com";

/// The parts of the stored login file other than the declared login (`claudeAiOauth`):
/// the logins of MCP servers (`mcpOAuth`) and whatever else a CLI keeps there. Their tokens
/// are not declared, so they would enter the sandbox: their names (never values) are
/// returned so the walls can refuse the profile. Read without following a link, bounded.
pub fn other_credentials(profile: &std::path::Path) -> Vec<String> {
    let Ok(bytes) = stet_plugin_support::read_untrusted(&profile.join(FILE), 1 << 20) else {
        return Vec::new();
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(map)) => map
            .keys()
            .filter(|k| k.as_str() != "claudeAiOauth")
            .cloned()
            .collect(),
        _ => Vec::new(),
    }
}

/// When the stored login's access token expires (`claudeAiOauth.expiresAt`, milliseconds
/// since the epoch), if the profile holds one. A time, not a token.
pub fn expires_at_ms(profile: &std::path::Path) -> Option<u64> {
    let bytes = stet_plugin_support::read_untrusted(&profile.join(FILE), 1 << 20).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    json.pointer("/claudeAiOauth/expiresAt")?.as_u64()
}

/// The most of a stored login file read.
const FILE_LIMIT: u64 = 1 << 20;

/// The longest token accepted from a renewed login (Claude Code's are about 100 bytes).
const TOKEN_LIMIT: usize = 4096;

/// Whether the stored login holds a refresh token to renew it with.
pub fn renewable(profile: &std::path::Path) -> bool {
    stored(profile).is_ok_and(|(_, login)| login.get("refreshToken").is_some_and(is_token))
}

/// Copies the stored login, and nothing else of the profile, into `work_dir` for the
/// refresh launch (mode 600). Refused when there is no stored login that can be renewed.
pub fn copy_for_refresh(
    profile: &std::path::Path,
    work_dir: &std::path::Path,
) -> Result<(), stet_plugin_api::PluginError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let (bytes, _) = stored(profile)?;
    if !renewable(profile) {
        return Err(stet_plugin_api::PluginError::invalid_input(format!(
            "the stored login in {} has no refresh token, so it cannot be renewed",
            profile.join(FILE).display()
        ))
        .with_remedy("log in again: stet profile login"));
    }
    let copy = work_dir.join(FILE);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&copy)
        .and_then(|mut f| f.write_all(&bytes))
        .map_err(|e| {
            stet_plugin_api::PluginError::backend(format!("cannot write {}: {e}", copy.display()))
        })
}

/// After the refresh launch: the login it renewed in `work_dir`, checked by its shape
/// (written inside a sandbox: data), put into the profile's login file in place of the old
/// one, atomically (a new file renamed over it, mode 600); the file's other fields are
/// kept. Returns the new expiry. An error, and the profile untouched, when the copy holds
/// no login newer than the profile's.
pub fn settle_refresh(
    profile: &std::path::Path,
    work_dir: &std::path::Path,
) -> Result<u64, stet_plugin_api::PluginError> {
    use stet_plugin_api::PluginError;
    let path = profile.join(FILE);
    let (_, old) = stored(profile)?;
    let renewed = stet_plugin_support::read_untrusted(&work_dir.join(FILE), FILE_LIMIT)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("claudeAiOauth").cloned());
    let not_renewed = |why: &str| {
        PluginError::backend(format!("Claude Code did not renew the stored login: {why}"))
            .with_remedy(format!(
                "if the login was revoked or is too old, log in again (stet profile login); \
                 if {OAUTH_HOST} cannot be reached from this machine, name the relay that reaches it ([network.connect_to])"
            ))
    };
    let refused = "it left no renewed login (the OAuth host refused the refresh token, or could not be reached)";
    let Some(renewed) = renewed.filter(|r| r.get("accessToken").is_some()) else {
        return Err(not_renewed(refused));
    };
    let (Some(access), Some(refresh), Some(expires)) = (
        renewed.get("accessToken").filter(|t| is_token(t)),
        renewed.get("refreshToken").filter(|t| is_token(t)),
        renewed.get("expiresAt").and_then(serde_json::Value::as_u64),
    ) else {
        return Err(not_renewed(
            "the login it left lacks an access token, a refresh token or an expiry",
        ));
    };
    let old_expires = old
        .get("expiresAt")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if expires <= old_expires || old.get("accessToken") == Some(access) {
        return Err(not_renewed(&format!(
            "{refused}: the login is the one it was given"
        )));
    }
    let bytes = stet_plugin_support::read_untrusted(&path, FILE_LIMIT)
        .map_err(|e| PluginError::backend(format!("cannot read {}: {e}", path.display())))?;
    let mut whole: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| PluginError::backend(format!("{} is not JSON: {e}", path.display())))?;
    let Some(login) = whole
        .get_mut("claudeAiOauth")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return Err(PluginError::backend(format!(
            "{} changed while the login was renewed",
            path.display()
        )));
    };
    login.insert("accessToken".into(), access.clone());
    login.insert("refreshToken".into(), refresh.clone());
    login.insert("expiresAt".into(), expires.into());
    if let Some(scopes) = renewed.get("scopes").filter(|s| {
        s.as_array().is_some_and(|a| {
            a.len() < 64 && a.iter().all(|x| x.as_str().is_some_and(|x| x.len() < 128))
        })
    }) {
        login.insert("scopes".into(), scopes.clone());
    }
    write_private(&path, whole.to_string().as_bytes())
        .map_err(|e| PluginError::backend(format!("cannot write {}: {e}", path.display())))?;
    Ok(expires)
}

/// The stored login file's bytes and its `claudeAiOauth` object.
fn stored(
    profile: &std::path::Path,
) -> Result<(Vec<u8>, serde_json::Value), stet_plugin_api::PluginError> {
    let path = profile.join(FILE);
    let bytes = stet_plugin_support::read_untrusted(&path, FILE_LIMIT).map_err(|e| {
        stet_plugin_api::PluginError::invalid_input(format!(
            "there is no stored login to renew in {}: {e}",
            path.display()
        ))
        .with_remedy("log in: stet profile login")
    })?;
    let login = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("claudeAiOauth").cloned())
        .filter(serde_json::Value::is_object)
        .ok_or_else(|| {
            stet_plugin_api::PluginError::invalid_input(format!(
                "{} holds no stored login (claudeAiOauth)",
                path.display()
            ))
            .with_remedy("log in: stet profile login")
        })?;
    Ok((bytes, login))
}

/// A token's shape: printable ASCII without spaces, bounded.
fn is_token(value: &serde_json::Value) -> bool {
    value.as_str().is_some_and(|t| {
        !t.is_empty() && t.len() <= TOKEN_LIMIT && t.bytes().all(|b| b.is_ascii_graphic())
    })
}

/// Writes `bytes` to `path` through a new file beside it (mode 600) renamed over it, so
/// that a crash leaves the old file or the new one, never half of either.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let staged = dir.join(format!(".{FILE}.stet-{}", std::process::id()));
    let _ = std::fs::remove_file(&staged);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&staged)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&staged, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// The variable Claude Code reads a long-lived token from (`claude setup-token`).
pub const TOKEN_VARIABLE: &str = "CLAUDE_CODE_OAUTH_TOKEN";

/// Where the person keeps a long-lived token beside the profile: `<profile>.oauth-token`
/// (`claude setup-token` prints it and saves nothing). A file, so it is not a profile.
pub fn token_file(profile: &std::path::Path) -> std::path::PathBuf {
    let name = profile
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    profile.with_file_name(format!("{name}.oauth-token"))
}

/// The long-lived token beside `profile`, if the person stored one: read to be put in the
/// launch's variable, which the host seals (a stand-in replaces it before the sandbox is
/// made). Refused when others may read the file.
pub fn token(profile: &std::path::Path) -> Result<Option<String>, stet_plugin_api::PluginError> {
    use std::os::unix::fs::PermissionsExt;
    let path = token_file(profile);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(stet_plugin_api::PluginError::backend(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return Err(stet_plugin_api::PluginError::invalid_input(format!(
            "the long-lived token {} is not a file only you can read",
            path.display()
        ))
        .with_remedy(format!("chmod 600 {}", path.display())));
    }
    let bytes = stet_plugin_support::read_untrusted(&path, 16 * 1024).map_err(|e| {
        stet_plugin_api::PluginError::backend(format!("cannot read {}: {e}", path.display()))
    })?;
    let token = String::from_utf8_lossy(&bytes).trim().to_string();
    Ok((!token.is_empty()).then_some(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(dir: &std::path::Path, access: &str, refresh: &str, expires: u64) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join(FILE),
            serde_json::json!({"claudeAiOauth": {"accessToken": access, "refreshToken": refresh,
                "expiresAt": expires, "subscriptionType": "pro"}, "other": 1})
            .to_string(),
        )
        .unwrap();
    }

    #[test]
    fn a_renewed_login_replaces_the_old_one_and_keeps_the_rest() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (profile, work) = (dir.path().join("claude"), dir.path().join("work"));
        login(&profile, "old-access-aaaaaaaa", "old-refresh-aaaaaaa", 1000);
        std::fs::create_dir(&work).unwrap();
        copy_for_refresh(&profile, &work).unwrap();
        let copied = std::fs::metadata(work.join(FILE)).unwrap();
        assert_eq!(copied.permissions().mode() & 0o777, 0o600);
        // Nothing renewed: refused, profile untouched.
        let e = settle_refresh(&profile, &work).unwrap_err();
        assert!(e.message.contains("the one it was given"), "{}", e.message);
        login(&work, "new-access-bbbbbbbb", "new-refresh-bbbbbbb", 2000);
        assert_eq!(settle_refresh(&profile, &work).unwrap(), 2000);
        let now: serde_json::Value =
            serde_json::from_slice(&std::fs::read(profile.join(FILE)).unwrap()).unwrap();
        assert_eq!(now["claudeAiOauth"]["accessToken"], "new-access-bbbbbbbb");
        assert_eq!(now["claudeAiOauth"]["refreshToken"], "new-refresh-bbbbbbb");
        assert_eq!(now["claudeAiOauth"]["subscriptionType"], "pro");
        assert_eq!(now["other"], 1);
        let written = std::fs::metadata(profile.join(FILE)).unwrap();
        assert_eq!(written.permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn what_a_refresh_left_is_data_checked_by_shape() {
        let dir = tempfile::tempdir().unwrap();
        let (profile, work) = (dir.path().join("claude"), dir.path().join("work"));
        login(&profile, "old-access-aaaaaaaa", "old-refresh-aaaaaaa", 1000);
        std::fs::create_dir_all(&work).unwrap();
        // A link to somewhere else is not followed.
        std::os::unix::fs::symlink(profile.join(FILE), work.join(FILE)).unwrap();
        assert!(settle_refresh(&profile, &work).is_err());
        std::fs::remove_file(work.join(FILE)).unwrap();
        login(&work, "new access with spaces", "new-refresh-bbbbbbb", 2000);
        let e = settle_refresh(&profile, &work).unwrap_err();
        assert!(e.message.contains("lacks an access token"), "{}", e.message);
        login(&work, "new-access-bbbbbbbb", "new-refresh-bbbbbbb", 999);
        assert!(settle_refresh(&profile, &work).is_err(), "an older expiry");
        let kept: serde_json::Value =
            serde_json::from_slice(&std::fs::read(profile.join(FILE)).unwrap()).unwrap();
        assert_eq!(kept["claudeAiOauth"]["accessToken"], "old-access-aaaaaaaa");
    }

    #[test]
    fn a_login_without_a_refresh_token_cannot_be_renewed() {
        let dir = tempfile::tempdir().unwrap();
        let (profile, work) = (dir.path().join("claude"), dir.path().join("work"));
        login(&profile, "old-access-aaaaaaaa", "", 1000);
        std::fs::create_dir(&work).unwrap();
        let e = copy_for_refresh(&profile, &work).unwrap_err();
        assert!(e.message.contains("no refresh token"), "{}", e.message);
        assert!(!work.join(FILE).exists());
    }

    #[test]
    fn the_token_lives_beside_the_profile_and_only_its_owner_may_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let profile = dir.path().join("claude");
        std::fs::create_dir(&profile).unwrap();
        assert_eq!(token_file(&profile), dir.path().join("claude.oauth-token"));
        assert_eq!(token(&profile).unwrap(), None);
        std::fs::write(token_file(&profile), "sk-ant-oat01-long-lived\n").unwrap();
        std::fs::set_permissions(token_file(&profile), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        let e = token(&profile).unwrap_err();
        assert!(e.remedy.starts_with("chmod 600"), "{}", e.remedy);
        std::fs::set_permissions(token_file(&profile), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        assert_eq!(
            token(&profile).unwrap().as_deref(),
            Some("sk-ant-oat01-long-lived")
        );
    }
}
