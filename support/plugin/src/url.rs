//! The two readings of a model API's base URL that the harnesses need: where it is (its
//! `host:port`, for the network wall and a credential's declared host) and its path (kept
//! when the sandbox reaches the API through the host's gateway). Plain string work: the
//! URL is the person's setting, never the agent's.

/// `url`'s `host:port`: its own port, else its scheme's (80 for `http`, 443 otherwise; a
/// URL without a scheme is taken as `https`).
pub fn endpoint(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let authority = rest.split('/').next().unwrap_or(rest);
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
        && !authority.ends_with(']');
    if has_port {
        authority.to_string()
    } else if scheme.eq_ignore_ascii_case("http") {
        format!("{authority}:80")
    } else {
        format!("{authority}:443")
    }
}

/// `url`'s path without its trailing slashes (`https://h/backend-api/codex/` →
/// `/backend-api/codex`); empty when it has none, or no scheme.
pub fn path(url: &str) -> &str {
    url.split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("")
        .trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_the_urls_port_else_its_schemes() {
        assert_eq!(endpoint("http://127.0.0.1:8080/v1"), "127.0.0.1:8080");
        assert_eq!(endpoint("http://fake.test/v1"), "fake.test:80");
        assert_eq!(
            endpoint("https://chatgpt.com/backend-api/codex"),
            "chatgpt.com:443"
        );
        assert_eq!(endpoint("api.anthropic.com"), "api.anthropic.com:443");
        assert_eq!(endpoint("https://[::1]"), "[::1]:443");
        assert_eq!(endpoint("https://[::1]:8443/x"), "[::1]:8443");
    }

    #[test]
    fn a_path_loses_its_trailing_slashes() {
        assert_eq!(
            path("https://chatgpt.com/backend-api/codex/"),
            "/backend-api/codex"
        );
        assert_eq!(path("http://127.0.0.1:9/v1"), "/v1");
        assert_eq!(path("https://api.anthropic.com"), "");
        assert_eq!(path("https://api.anthropic.com/"), "");
        assert_eq!(path("no-scheme/x"), "");
    }
}
