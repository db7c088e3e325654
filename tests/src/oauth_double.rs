//! A test double of Claude Code's OAuth host (`platform.claude.com`), or of another CLI's
//! ([`OauthDouble::start_for`]: the Codex CLI's `auth.openai.com`, `POST /oauth/token`), on
//! 127.0.0.1 over TLS with a certificate of a CA made for the test, so that the real CLI
//! renews a (dummy) login against it exactly as it would against the real host: `POST
//! /v1/oauth/token` with `grant_type=refresh_token`, over its own TLS, through stet's proxy.
//!
//! The CLI trusts the CA only because the test says so (`NODE_EXTRA_CA_CERTS`, set by the
//! claude plugin's `extra_ca_certs`), and reaches the double only because the test's
//! `[network.connect_to]` dials `platform.claude.com:443` here. What this verifies and what
//! it cannot (the real host's answers) is said in the README.

use std::io::{BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// The host name the double's certificate is for.
pub const HOST: &str = "platform.claude.com";

/// What the double answers a token request with.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A renewed login: these tokens, good for `expires_in` seconds.
    Renew {
        access_token: String,
        refresh_token: String,
        expires_in: u64,
    },
    /// A renewed login with an ID token too, as OpenAI's OAuth host answers the Codex CLI.
    RenewWithIdToken {
        id_token: String,
        access_token: String,
        refresh_token: String,
        expires_in: u64,
    },
    /// An OAuth error (`invalid_grant`: the refresh token is no longer good).
    Refuse { status: u16, error: String },
}

/// A request as the double saw it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line's path.
    pub path: String,
    /// The JSON body.
    pub body: Value,
}

/// The running double; stops serving when the test ends.
pub struct OauthDouble {
    /// Where it listens, `127.0.0.1:PORT`.
    pub addr: String,
    /// The CA's certificate, PEM, in a file of the test's.
    pub ca_pem: PathBuf,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl OauthDouble {
    /// Starts the double of Claude Code's OAuth host; the CA's PEM is written into `dir`.
    pub fn start(dir: &Path, answer: Answer) -> OauthDouble {
        OauthDouble::start_for(dir, HOST, "/v1/oauth/token", answer)
    }

    /// Starts a double of the OAuth host `host` answering token requests at `token_path`;
    /// the CA's PEM is written into `dir`.
    pub fn start_for(dir: &Path, host: &str, token_path: &str, answer: Answer) -> OauthDouble {
        let token_path = token_path.to_string();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "stet test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![host.to_string()]).unwrap();
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        let ca_pem = dir.join("test-ca.pem");
        std::fs::write(&ca_pem, ca.pem()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![cert.der().clone(), ca.der().clone()],
                    rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
                )
                .unwrap(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (config, seen, answer) = (config.clone(), seen.clone(), answer.clone());
                let token_path = token_path.clone();
                std::thread::spawn(move || {
                    let Ok(connection) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    let tls = rustls::StreamOwned::new(connection, stream);
                    let _ = serve(tls, &seen, &answer, &token_path);
                });
            }
        });
        OauthDouble {
            addr,
            ca_pem,
            requests,
        }
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    mut tls: impl Read + Write,
    seen: &Mutex<Vec<Request>>,
    answer: &Answer,
    token_path: &str,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(&mut tls);
    let Some(crate::http::Head { path, body, .. }) = crate::http::read_request(&mut reader)? else {
        return Ok(());
    };
    drop(reader);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().unwrap().push(Request {
        path: path.clone(),
        body,
    });
    let (status, reply) = if path != token_path {
        (404, json!({"error": "not_found"}))
    } else {
        match answer {
            Answer::Renew {
                access_token,
                refresh_token,
                expires_in,
            } => (
                200,
                json!({"token_type": "Bearer", "access_token": access_token,
                    "refresh_token": refresh_token, "expires_in": expires_in,
                    "scope": "user:inference user:profile"}),
            ),
            Answer::RenewWithIdToken {
                id_token,
                access_token,
                refresh_token,
                expires_in,
            } => (
                200,
                json!({"token_type": "Bearer", "id_token": id_token,
                    "access_token": access_token, "refresh_token": refresh_token,
                    "expires_in": expires_in}),
            ),
            Answer::Refuse { status, error } => (
                *status,
                json!({"error": error, "error_description": "refused by the test's double"}),
            ),
        }
    };
    let reply = reply.to_string();
    write!(
        tls,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    )?;
    tls.flush()
}
