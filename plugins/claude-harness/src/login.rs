//! The stored login, which never enters a sandbox.
//!
//! Claude Code keeps its login in the profile's `.credentials.json`
//! (`claudeAiOauth.accessToken`, `.refreshToken`, `.expiresAt`, …). Both tokens are declared
//! to the host (`HarnessPlugin::credentials`), which puts a random stand-in in place of each
//! in every call's copy of the profile; the access token's requests go to the model API
//! through the host's gateway, where the real one is swapped in. Nothing of a call's copy is
//! carried back: the copy holds stand-ins only, and what the agent writes there is its own.
//! Keeping the real login fresh is the host's side (the CLI with a future expiry never
//! refreshes; with a past one it tries the OAuth host, which the sandbox cannot reach).

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
/// since the epoch), if the profile holds one. A time, not a token: read to say so before
/// a drive rather than fail its calls (stet does not refresh a login; a sandbox cannot
/// reach the OAuth host).
pub fn expires_at_ms(profile: &std::path::Path) -> Option<u64> {
    let bytes = stet_plugin_support::read_untrusted(&profile.join(FILE), 1 << 20).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    json.pointer("/claudeAiOauth/expiresAt")?.as_u64()
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
