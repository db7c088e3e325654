//! Images: references as `ContainerizationOCI.Reference` parses and normalizes them, the
//! local Docker image store standing in for the content store, and the registry's answer for
//! an image that is not there (nothing is ever pulled).

use serde_json::Value;

use crate::docker::Docker;
use crate::errors::{cz, CliError, Code};
use crate::json::{render, Keys, J};
use crate::settings::Settings;

#[derive(Clone, Debug)]
pub struct Reference {
    pub domain: Option<String>,
    pub path: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

fn valid_path(p: &str) -> bool {
    // (?:[a-z0-9]+(?:[._]|__|-|/)?)*[a-z0-9]+ , matched as a whole
    let b = p.as_bytes();
    if b.is_empty() {
        return false;
    }
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < b.len() && alnum(b[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == b.len() {
            return true;
        }
        if b[i..].starts_with(b"__") {
            i += 2;
        } else if matches!(b[i], b'.' | b'_' | b'-' | b'/') {
            i += 1;
        } else {
            return false;
        }
        if i == b.len() {
            return false;
        }
    }
}

fn valid_tag(t: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut chars = t.chars();
    match chars.next() {
        Some(c) if word(c) => {}
        _ => return false,
    }
    t.chars().count() <= 128 && chars.all(|c| word(c) || c == '.' || c == '-')
}

impl Reference {
    pub fn parse(s: &str) -> Result<Reference, CliError> {
        let invalid = || cz(Code::InvalidArgument, "invalid format for image reference");
        if s.len() == 64 && s.chars().all(|c| matches!(c, 'a'..='f' | '0'..='9')) {
            return Err(cz(
                Code::InvalidArgument,
                "cannot specify 64 byte hex string as reference",
            ));
        }
        let (domain, rest) = match s.split_once('/') {
            Some((d, p)) if d.starts_with("localhost") || d.contains(['.', ':']) => {
                (Some(d.to_string()), p.to_string())
            }
            Some(_) => (None, s.to_string()),
            None if s.starts_with("localhost") => (Some(s.to_string()), String::new()),
            None => (None, s.to_string()),
        };
        let (rest, digest) = match rest.split_once('@') {
            Some((r, d)) => {
                let hex = d.strip_prefix("sha256:").ok_or_else(invalid)?;
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(invalid());
                }
                (r.to_string(), Some(d.to_string()))
            }
            None => (rest, None),
        };
        let (path, tag) = match rest.rsplit_once(':') {
            Some((p, t)) if !t.contains('/') => {
                if !valid_tag(t) {
                    return Err(invalid());
                }
                (p.to_string(), Some(t.to_string()))
            }
            _ => (rest.clone(), None),
        };
        if !valid_path(&path) {
            return Err(invalid());
        }
        // withDigest drops the tag.
        let tag = if digest.is_some() { None } else { tag };
        Ok(Reference {
            domain,
            path,
            tag,
            digest,
        })
    }

    /// `ClientImage.normalizeReference`: default registry, `library/`, `:latest`.
    pub fn normalized(s: &str) -> Result<Reference, CliError> {
        let r = Reference::parse(s)?;
        let mut r = if r.domain.is_none() {
            Reference::parse(&format!("docker.io/{s}"))?
        } else {
            r
        };
        if matches!(
            r.domain.as_deref(),
            Some("docker.io") | Some("registry-1.docker.io")
        ) && !r.path.contains('/')
        {
            r.path = format!("library/{}", r.path);
        }
        if r.tag.is_none() && r.digest.is_none() {
            r.tag = Some("latest".into());
        }
        Ok(r)
    }

    pub fn name(&self) -> String {
        match &self.domain {
            Some(d) if !d.is_empty() => format!("{d}/{}", self.path),
            _ => self.path.clone(),
        }
    }

    pub fn text(&self) -> String {
        if let Some(t) = &self.tag {
            format!("{}:{t}", self.name())
        } else if let Some(d) = &self.digest {
            format!("{}@{d}", self.name())
        } else {
            self.name()
        }
    }

    /// `denormalizeReference`: `alpine:latest` rather than `docker.io/library/alpine:latest`.
    pub fn display(&self) -> String {
        if self.domain.as_deref() == Some("docker.io") {
            let mut s = self.path.clone();
            if let Some(t) = &self.tag {
                s += &format!(":{t}");
            } else if let Some(d) = &self.digest {
                s += &format!("@{d}");
            }
            s.strip_prefix("library/").map(str::to_string).unwrap_or(s)
        } else {
            self.text()
        }
    }

    /// What Docker Hub (or another registry) answers for a repository that is not there.
    pub fn registry_error(&self) -> CliError {
        let host = match self.domain.as_deref() {
            Some("docker.io") | None => "registry-1.docker.io".to_string(),
            Some(d) => d.to_string(),
        };
        let id = self
            .tag
            .clone()
            .or_else(|| self.digest.clone())
            .unwrap_or_else(|| "latest".into());
        cz(
            Code::InternalError,
            format!(
                "HTTP request to https://{host}/v2/{}/manifests/{id} failed with response: 401 Unauthorized. Reason: Unknown, no credentials found for host {host}",
                self.path
            ),
        )
    }
}

/// A local image, as the stand-in's content store sees it.
pub struct LocalImage {
    pub reference: Reference,
    pub inspect: Value,
}

impl LocalImage {
    pub fn id(&self) -> String {
        self.inspect
            .get("Id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }
    pub fn os(&self) -> String {
        self.str_field("Os").unwrap_or_else(|| "linux".into())
    }
    pub fn architecture(&self) -> String {
        self.str_field("Architecture")
            .unwrap_or_else(host_architecture)
    }
    pub fn variant(&self) -> Option<String> {
        self.str_field("Variant").filter(|v| !v.is_empty())
    }
    pub fn size(&self) -> i64 {
        self.inspect
            .get("Size")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }
    fn str_field(&self, k: &str) -> Option<String> {
        self.inspect
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
    }
    pub fn config_strs(&self, k: &str) -> Option<Vec<String>> {
        self.inspect
            .pointer(&format!("/Config/{k}"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
    }
    pub fn config_str(&self, k: &str) -> Option<String> {
        self.inspect
            .pointer(&format!("/Config/{k}"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    }

    /// `ImageResource` (1.x `image inspect` / `image list --format json`).
    pub fn resource_json(&self) -> J {
        let id = self.id();
        let hex = id
            .split_once(':')
            .map(|(_, h)| h)
            .unwrap_or(&id)
            .to_string();
        let created = self
            .inspect
            .get("Created")
            .and_then(Value::as_str)
            .unwrap_or("1970-01-01T00:00:00Z")
            .to_string();
        let mut cfg = J::obj();
        if let Some(u) = self.config_str("User") {
            cfg = cfg.set("User", J::s(u));
        }
        if let Some(e) = self.config_strs("Env") {
            cfg = cfg.set("Env", J::strs(e));
        }
        if let Some(e) = self.config_strs("Entrypoint") {
            cfg = cfg.set("Entrypoint", J::strs(e));
        }
        if let Some(c) = self.config_strs("Cmd") {
            cfg = cfg.set("Cmd", J::strs(c));
        }
        if let Some(w) = self.config_str("WorkingDir") {
            cfg = cfg.set("WorkingDir", J::s(w));
        }
        if let Some(s) = self.config_str("StopSignal") {
            cfg = cfg.set("StopSignal", J::s(s));
        }
        let layers = self
            .inspect
            .pointer("/RootFS/Layers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let platform = J::obj()
            .set("os", J::s(self.os()))
            .set("architecture", J::s(self.architecture()))
            .opt("variant", self.variant().map(J::s))
            .done();
        let config = J::obj()
            .set("created", J::s(&created))
            .set("architecture", J::s(self.architecture()))
            .set("os", J::s(self.os()))
            .set("config", cfg.done())
            .set(
                "rootfs",
                J::obj()
                    .set("type", J::s("layers"))
                    .set("diff_ids", J::strs(layers))
                    .done(),
            )
            .done();
        let created_unix = parse_rfc3339(&created).unwrap_or(0.0);
        J::obj()
            .set("id", J::s(hex))
            .set(
                "configuration",
                J::obj()
                    .set("creationDate", crate::json::date(created_unix, true))
                    .set("name", J::s(self.reference.text()))
                    .set(
                        "descriptor",
                        J::obj()
                            .set("mediaType", J::s("application/vnd.oci.image.index.v1+json"))
                            .set("digest", J::s(&id))
                            .set("size", J::int(self.size()))
                            .done(),
                    )
                    .done(),
            )
            .set(
                "variants",
                J::Arr(vec![J::obj()
                    .set("platform", platform)
                    .set("digest", J::s(&id))
                    .set("size", J::int(self.size()))
                    .set("config", config)
                    .done()]),
            )
            .done()
    }
}

fn parse_rfc3339(s: &str) -> Option<f64> {
    // 2024-01-02T03:04:05.123Z or with offset; enough for Docker's `Created`.
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, dd) = (d.next()??, d.next()??, d.next()??);
    let hms: String = time.chars().take(8).collect();
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (h, mi, se) = (t.next()??, t.next()??, t.next()??);
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + dd - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + se) as f64)
}

pub fn host_architecture() -> String {
    match std::env::consts::ARCH {
        "x86_64" => "amd64".into(),
        "aarch64" => "arm64".into(),
        other => other.into(),
    }
}

/// `Platform(from:)` for the common spellings.
pub fn normalize_arch(a: &str) -> String {
    match a {
        "x86_64" | "x86-64" | "amd64" => "amd64".into(),
        "aarch64" | "arm64" => "arm64".into(),
        other => other.into(),
    }
}

/// Looks an image up in the local store; `Err` is what `ClientImage.fetch` would end with
/// (the registry refusing to serve it).
pub fn fetch(
    settings: &Settings,
    docker: &Docker,
    reference: &str,
    platform: Option<(&str, &str)>,
) -> Result<LocalImage, CliError> {
    let r = Reference::normalized(reference)?;
    let listed_missing = settings.missing_images.iter().any(|m| {
        Reference::normalized(m)
            .map(|n| n.text() == r.text())
            .unwrap_or(false)
    });
    if listed_missing {
        return Err(r.registry_error());
    }
    let Some(inspect) = docker.image(&r.text()) else {
        return Err(r.registry_error());
    };
    let img = LocalImage {
        reference: r.clone(),
        inspect,
    };
    if let Some((os, arch)) = platform {
        if img.os() != os || normalize_arch(&img.architecture()) != normalize_arch(arch) {
            return Err(r.registry_error());
        }
    }
    Ok(img)
}

/// All tagged local images.
pub fn list(docker: &Docker) -> Result<Vec<LocalImage>, CliError> {
    let out = docker.ok(&[
        "image".into(),
        "ls".into(),
        "--format".into(),
        "{{.Repository}}:{{.Tag}}".into(),
    ])?;
    let mut refs: Vec<String> = out
        .lines()
        .filter(|l| !l.contains("<none>") && !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    refs.sort();
    refs.dedup();
    let mut images = Vec::new();
    for r in refs {
        let Ok(reference) = Reference::normalized(&r) else {
            continue;
        };
        if let Some(inspect) = docker.image(&r) {
            images.push(LocalImage { reference, inspect });
        }
    }
    images.sort_by_key(|a| a.reference.text());
    Ok(images)
}

pub fn resources_json(images: &[LocalImage], pretty: bool) -> String {
    render(
        &J::Arr(images.iter().map(LocalImage::resource_json).collect()),
        pretty,
        Keys::Sorted,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_containerization() {
        assert_eq!(
            Reference::normalized("stet-lane:1").unwrap().text(),
            "docker.io/library/stet-lane:1"
        );
        assert_eq!(
            Reference::normalized("alpine").unwrap().text(),
            "docker.io/library/alpine:latest"
        );
        assert_eq!(
            Reference::normalized("ghcr.io/a/b:2").unwrap().text(),
            "ghcr.io/a/b:2"
        );
        assert_eq!(
            Reference::normalized("localhost:5000/x").unwrap().text(),
            "localhost:5000/x:latest"
        );
        assert!(Reference::parse("Upper").is_err());
        assert_eq!(
            Reference::normalized("stet-lane:1").unwrap().display(),
            "stet-lane:1"
        );
    }

    #[test]
    fn registry_error_names_the_manifest() {
        let e = Reference::normalized("nosuch").unwrap().registry_error();
        assert_eq!(
            e.describe(crate::errors::ErrorForm::Message),
            "HTTP request to https://registry-1.docker.io/v2/library/nosuch/manifests/latest failed with response: 401 Unauthorized. Reason: Unknown, no credentials found for host registry-1.docker.io"
        );
    }
}
