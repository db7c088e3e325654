//! The stored login, read in one place only: to carry a login the CLI refreshed during a
//! call back into the walled profile. Each call runs on a fresh copy of the profile that
//! the host deletes afterwards; a refresh rotates the refresh token, and losing the rotated
//! one would lose the login. The copy was writable by the agent, so what is carried back is
//! held to the login's shape and to being a refresh of the login that is there: the same
//! kind of login (scopes, subscription), a later expiry, a changed token. Tokens are never
//! logged, printed or compared as text outside this file.
//!
//! This is the one exception to "nothing a call writes reaches a later call", until the
//! login stays out of the sandbox altogether (a stand-in login in the copy).

use std::path::Path;

use serde_json::Value;
use stet_plugin_api::PluginError;

/// Where Claude Code keeps its stored login in the profile.
pub const FILE: &str = ".credentials.json";

/// The largest credentials file read.
const LIMIT: u64 = 64 * 1024;

/// A stored login's parts that decide whether one replaces another.
struct Login {
    access: String,
    refresh: String,
    expires_at: u64,
    kind: (Value, Value),
    whole: Value,
}

fn login_of(bytes: &[u8]) -> Option<Login> {
    let whole: Value = serde_json::from_slice(bytes).ok()?;
    let oauth = whole.get("claudeAiOauth")?;
    Some(Login {
        access: oauth.get("accessToken")?.as_str()?.to_string(),
        refresh: oauth.get("refreshToken")?.as_str()?.to_string(),
        expires_at: oauth.get("expiresAt")?.as_u64()?,
        kind: (
            oauth.get("scopes").cloned().unwrap_or(Value::Null),
            oauth
                .get("subscriptionType")
                .cloned()
                .unwrap_or(Value::Null),
        ),
        whole,
    })
}

/// Reads a file the agent could have written, as data: no link followed, bounded.
fn read(path: &Path) -> Option<Vec<u8>> {
    stet_plugin_support::read_untrusted(path, LIMIT).ok()
}

/// Carries the login in `used` (the call's copy) back into `profile` when it is a refresh
/// of the login there. Returns the files carried.
pub fn carry_back_refreshed(profile: &Path, used: &Path) -> Result<Vec<String>, PluginError> {
    let Some(theirs) = read(&used.join(FILE)).and_then(|b| login_of(&b)) else {
        return Ok(Vec::new());
    };
    let Some(ours) = read(&profile.join(FILE)).and_then(|b| login_of(&b)) else {
        return Ok(Vec::new());
    };
    let refreshed = theirs.expires_at > ours.expires_at
        && theirs.kind == ours.kind
        && (theirs.access != ours.access || theirs.refresh != ours.refresh);
    if !refreshed {
        return Ok(Vec::new());
    }
    let text =
        serde_json::to_vec(&theirs.whole).map_err(|e| PluginError::internal(e.to_string()))?;
    let target = profile.join(FILE);
    let partial = profile.join(".credentials.json.stet-partial");
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(&partial);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)?;
        file.write_all(&text)?;
        file.sync_all()?;
        std::fs::rename(&partial, &target)
    };
    write().map_err(|e| {
        PluginError::backend(format!(
            "cannot carry the refreshed login back into {}: {e}",
            target.display()
        ))
    })?;
    Ok(vec![FILE.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(access: &str, refresh: &str, expires: u64, subscription: &str) -> String {
        serde_json::json!({"claudeAiOauth": {"accessToken": access, "refreshToken": refresh,
            "expiresAt": expires, "scopes": ["user:inference"], "subscriptionType": subscription}})
        .to_string()
    }

    fn dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let (profile, used) = (root.path().join("profile"), root.path().join("used"));
        std::fs::create_dir_all(&profile).unwrap();
        std::fs::create_dir_all(&used).unwrap();
        (root, profile, used)
    }

    #[test]
    fn a_refreshed_login_is_carried_back() {
        let (_root, profile, used) = dirs();
        std::fs::write(profile.join(FILE), login("a1", "r1", 100, "max")).unwrap();
        std::fs::write(used.join(FILE), login("a2", "r2", 200, "max")).unwrap();
        assert_eq!(carry_back_refreshed(&profile, &used).unwrap(), [FILE]);
        let now = login_of(&std::fs::read(profile.join(FILE)).unwrap()).unwrap();
        assert_eq!((now.refresh.as_str(), now.expires_at), ("r2", 200));
    }

    #[test]
    fn anything_else_the_call_wrote_stays_behind() {
        let (_root, profile, used) = dirs();
        let ours = login("a1", "r1", 100, "max");
        std::fs::write(profile.join(FILE), &ours).unwrap();
        for planted in [
            login("a1", "r1", 100, "max"),                         // unchanged
            login("a2", "r2", 50, "max"),                          // older
            login("x", "y", 900, "pro"),                           // another kind of login
            "{\"claudeAiOauth\":{\"accessToken\":1}}".to_string(), // not the shape
            "not json".to_string(),
        ] {
            std::fs::write(used.join(FILE), planted).unwrap();
            assert!(carry_back_refreshed(&profile, &used).unwrap().is_empty());
            assert_eq!(std::fs::read_to_string(profile.join(FILE)).unwrap(), ours);
        }
        // A link to somewhere else is not followed.
        let elsewhere = used.join("elsewhere.json");
        std::fs::write(&elsewhere, login("a9", "r9", 999, "max")).unwrap();
        std::fs::remove_file(used.join(FILE)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, used.join(FILE)).unwrap();
        assert!(carry_back_refreshed(&profile, &used).unwrap().is_empty());
    }
}
