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
