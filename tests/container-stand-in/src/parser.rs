//! `Parser` (Sources/Services/ContainerAPIService/Client/Parser.swift): how flag values become
//! a container configuration, with the same checks and error texts.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use crate::errors::{cz, cz_cause, CliError, CliResult, Code};
use crate::model::{Mount, MountType, PublishPort, PublishSocket, Rlimit, User};

/// Swift's `split(separator:maxSplits:omittingEmptySubsequences:)`.
pub fn swift_split(s: &str, sep: char, max_splits: usize, omit_empty: bool) -> Vec<String> {
    let mut result: Vec<String> = Vec::new();
    if max_splits == 0 || s.is_empty() {
        if !(s.is_empty() && omit_empty) {
            result.push(s.to_string());
        }
        return result;
    }
    let chars: Vec<char> = s.chars().collect();
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == sep {
            let piece: String = chars[start..i].iter().collect();
            let appended = if piece.is_empty() && omit_empty {
                false
            } else {
                result.push(piece);
                true
            };
            i += 1;
            start = i;
            if appended && result.len() == max_splits {
                break;
            }
            continue;
        }
        i += 1;
    }
    if start != chars.len() || !omit_empty {
        result.push(chars[start..].iter().collect());
    }
    result
}

/// `Measurement.parse(parsing:)`, in bytes.
pub fn measurement_bytes(text: &str) -> CliResult<f64> {
    let trimmed = text.trim_matches([' ', '\t']).to_lowercase();
    if trimmed.is_empty() {
        return Err(CliError::Plain("invalid size".into()));
    }
    let check = "01234567890.";
    let i = trimmed
        .char_indices()
        .find(|(_, c)| !check.contains(*c))
        .map(|(i, _)| i);
    let (raw_value, raw_unit) = match i {
        Some(i) => (
            trimmed[..i].trim_matches([' ', '\t']).to_string(),
            trimmed[i..].trim_matches([' ', '\t']).to_string(),
        ),
        None => (trimmed.clone(), String::new()),
    };
    let value: f64 = raw_value
        .parse()
        .ok()
        .filter(|_| !raw_value.is_empty())
        .ok_or_else(|| CliError::Plain("invalid size".into()))?;
    let mut chars = raw_unit.chars();
    let symbol = chars.next().unwrap_or('b');
    let rest: String = chars.collect();
    if !matches!(rest.as_str(), "" | "ib" | "b") {
        return Err(CliError::Plain(format!("invalid symbol: {raw_unit}")));
    }
    let factor: f64 = match symbol {
        'b' => 1.0,
        'k' => 1024.0,
        'm' => 1024.0 * 1024.0,
        'g' => 1024.0 * 1024.0 * 1024.0,
        't' => 1024f64.powi(4),
        'p' => 1024f64.powi(5),
        _ => return Err(CliError::Plain(format!("invalid symbol: {raw_unit}"))),
    };
    Ok(value * factor)
}

/// `memoryStringAsMiB`, truncated like `Int64(mb.value)`.
pub fn memory_mib(text: &str) -> CliResult<i64> {
    let bytes = measurement_bytes(text)?;
    Ok((bytes / (1024.0 * 1024.0))
        .trunc()
        .clamp(i64::MIN as f64, i64::MAX as f64) as i64)
}

/// `Parser.env`: a bare `KEY` is copied from this process's environment, or skipped.
pub fn env(list: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for e in list {
        if !e.contains('=') {
            match std::env::var(e) {
                Ok(v) => out.push(format!("{e}={v}")),
                Err(_) => continue,
            }
        } else {
            out.push(e.clone());
        }
    }
    out
}

/// `Parser.envFile` (Moby's kvfile rules).
pub fn env_file(path: &str) -> CliResult<Vec<String>> {
    let data = std::fs::read(path).map_err(|e| {
        cz_cause(
            Code::InvalidArgument,
            format!("failed to read envfile at {path}"),
            CliError::Plain(e.to_string()),
        )
    })?;
    let content = String::from_utf8(data).map_err(|_| {
        cz(
            Code::InvalidArgument,
            format!("env file {path} contains invalid utf8 bytes"),
        )
    })?;
    let mut lines = Vec::new();
    for line in content.split(['\n', '\r']) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (variable, value, has_value) = match trimmed.find('=') {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..], true),
            None => (trimmed, "", false),
        };
        let variable = variable.trim_start_matches([' ', '\t']);
        if variable.contains([' ', '\t']) {
            return Err(cz(
                Code::InvalidArgument,
                format!("variable '{variable}' contains whitespaces"),
            ));
        }
        if variable.is_empty() {
            return Err(cz(
                Code::InvalidArgument,
                format!("no variable name on line '{trimmed}'"),
            ));
        }
        if has_value {
            lines.push(format!("{variable}={value}"));
        } else if let Ok(v) = std::env::var(variable) {
            lines.push(format!("{variable}={v}"));
        }
    }
    Ok(lines)
}

/// `Parser.allEnv`: image env (only `K=V`), env files, `-e`; merged by key, later wins. The
/// result comes out of a Swift dictionary, so its order is arbitrary.
pub fn all_env(
    image_env: &[String],
    env_files: &[String],
    envs: &[String],
) -> CliResult<Vec<String>> {
    let mut combined: Vec<String> = image_env
        .iter()
        .filter(|e| e.contains('='))
        .cloned()
        .collect();
    for f in env_files {
        combined.extend(env_file(f)?);
    }
    combined.extend(env(envs));
    let mut map: HashMap<String, String> = HashMap::new();
    for entry in combined {
        let key = swift_split(&entry, '=', 1, true)
            .into_iter()
            .next()
            .unwrap_or_else(|| entry.clone());
        map.insert(key, entry);
    }
    let mut out: Vec<String> = map.into_values().collect();
    crate::json::shuffle(&mut out);
    Ok(out)
}

/// `Parser.labels`.
pub fn labels(raw: &[String]) -> CliResult<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for label in raw {
        if label.is_empty() {
            return Err(cz(Code::InvalidArgument, "label cannot be an empty string"));
        }
        let parts = swift_split(label, '=', 2, true);
        match parts.len() {
            1 => {
                out.insert(parts[0].clone(), String::new());
            }
            2 => {
                out.insert(parts[0].clone(), parts[1].clone());
            }
            _ => {
                return Err(cz(
                    Code::InvalidArgument,
                    format!("invalid label format {label}"),
                ))
            }
        }
    }
    Ok(out)
}

/// `Parser.user`.
pub fn user(
    user: Option<&str>,
    uid: Option<u32>,
    gid: Option<u32>,
    default: User,
) -> (User, Vec<u32>) {
    if let Some(u) = user.filter(|u| !u.is_empty()) {
        return (User::Raw(u.to_string()), vec![]);
    }
    match (uid, gid) {
        (Some(u), Some(g)) => (User::Id(u, g), vec![]),
        (None, None) => (default, vec![]),
        (Some(u), None) => (User::Raw(u.to_string()), vec![]),
        (None, Some(g)) => (default, vec![g]),
    }
}

const ULIMITS: &[(&str, &str)] = &[
    ("core", "RLIMIT_CORE"),
    ("cpu", "RLIMIT_CPU"),
    ("data", "RLIMIT_DATA"),
    ("fsize", "RLIMIT_FSIZE"),
    ("locks", "RLIMIT_LOCKS"),
    ("memlock", "RLIMIT_MEMLOCK"),
    ("msgqueue", "RLIMIT_MSGQUEUE"),
    ("nice", "RLIMIT_NICE"),
    ("nofile", "RLIMIT_NOFILE"),
    ("nproc", "RLIMIT_NPROC"),
    ("rss", "RLIMIT_RSS"),
    ("rtprio", "RLIMIT_RTPRIO"),
    ("rttime", "RLIMIT_RTTIME"),
    ("sigpending", "RLIMIT_SIGPENDING"),
    ("stack", "RLIMIT_STACK"),
];

pub fn docker_ulimit_name(rlimit: &str) -> Option<&'static str> {
    ULIMITS.iter().find(|(_, r)| *r == rlimit).map(|(n, _)| *n)
}

/// `Parser.rlimits`.
pub fn rlimits(raw: &[String]) -> CliResult<Vec<Rlimit>> {
    let mut out: Vec<Rlimit> = Vec::new();
    for u in raw {
        let parts = swift_split(u, '=', 1, true);
        if parts.len() != 2 {
            return Err(cz(
                Code::InvalidArgument,
                format!("invalid ulimit format '{u}': expected <type>=<soft>[:<hard>]"),
            ));
        }
        let type_name = parts[0].to_lowercase();
        let Some((_, limit)) = ULIMITS.iter().find(|(n, _)| *n == type_name) else {
            let valid = ULIMITS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ");
            return Err(cz(
                Code::InvalidArgument,
                format!("unsupported ulimit type '{type_name}': valid types are {valid}"),
            ));
        };
        let value = |v: &str| -> CliResult<u64> {
            let t = v.trim_matches([' ', '\t']).to_lowercase();
            if t == "unlimited" || t == "-1" {
                return Ok(u64::MAX);
            }
            t.parse::<u64>().map_err(|_| {
                cz(
                    Code::InvalidArgument,
                    format!(
                        "invalid ulimit value '{v}' for '{type_name}': must be a non-negative integer or 'unlimited'"
                    ),
                )
            })
        };
        let vp = swift_split(&parts[1], ':', 1, true);
        let (soft, hard) = match vp.len() {
            1 => {
                let s = value(&vp[0])?;
                (s, s)
            }
            2 => (value(&vp[0])?, value(&vp[1])?),
            _ => {
                return Err(cz(
                    Code::InvalidArgument,
                    format!("invalid ulimit format '{u}': expected <type>=<soft>[:<hard>]"),
                ))
            }
        };
        if soft > hard {
            return Err(cz(
                Code::InvalidArgument,
                format!(
                    "ulimit '{type_name}' soft limit ({soft}) cannot exceed hard limit ({hard})"
                ),
            ));
        }
        if out.iter().any(|r| r.limit == *limit) {
            return Err(cz(
                Code::InvalidArgument,
                format!(
                    "duplicate ulimit type: {}",
                    u.split('=').next().unwrap_or("")
                ),
            ));
        }
        out.push(Rlimit {
            limit: limit.to_string(),
            soft,
            hard,
        });
    }
    Ok(out)
}

/// `URL(filePath:).absoluteURL.path`: absolute, `.`/`..` resolved lexically, no trailing `/`.
pub fn absolute(path: &str) -> String {
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let joined = if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        base.join(path)
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out.to_string_lossy().into_owned()
}

fn valid_volume_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.chars().count() <= 255
        && matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

const VOLUME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_.-]*$";

pub fn uuid() -> String {
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A mount before volumes are resolved.
pub enum VolOrFs {
    Fs(Mount),
    Volume {
        name: String,
        destination: String,
        options: Vec<String>,
        anonymous: bool,
    },
}

fn validate_mount(m: &VolOrFs) -> CliResult<()> {
    match m {
        VolOrFs::Fs(fs) => {
            if !matches!(fs.kind, MountType::Tmpfs) {
                if !fs.source.starts_with('/') {
                    return Err(cz(
                        Code::InvalidArgument,
                        format!("{} is not an absolute path on the host", fs.source),
                    ));
                }
                if !Path::new(&fs.source).exists() {
                    return Err(cz(
                        Code::InvalidArgument,
                        format!("file path '{}' does not exist", fs.source),
                    ));
                }
            }
            if fs.destination.is_empty() {
                return Err(cz(
                    Code::InvalidArgument,
                    "mount destination cannot be empty",
                ));
            }
        }
        VolOrFs::Volume { destination, .. } => {
            if destination.is_empty() {
                return Err(cz(
                    Code::InvalidArgument,
                    "volume destination cannot be empty",
                ));
            }
        }
    }
    Ok(())
}

/// `Parser.volume` (`-v`).
pub fn volume(spec: &str) -> CliResult<VolOrFs> {
    let vol = spec.trim_start_matches(':');
    let parts = swift_split(vol, ':', usize::MAX, true);
    let m = match parts.len() {
        1 => VolOrFs::Volume {
            name: uuid(),
            destination: parts[0].clone(),
            options: vec![],
            anonymous: true,
        },
        2 | 3 => {
            let src = &parts[0];
            let dst = parts[1].clone();
            let options: Vec<String> = if parts.len() == 3 {
                swift_split(&parts[2], ',', usize::MAX, true)
            } else {
                vec![]
            };
            if !(src.contains('/') || src == "." || src == "..") {
                if !valid_volume_name(src) {
                    return Err(cz(
                        Code::InvalidArgument,
                        format!("invalid volume name '{src}': must match {VOLUME_PATTERN}"),
                    ));
                }
                VolOrFs::Volume {
                    name: src.clone(),
                    destination: dst,
                    options,
                    anonymous: false,
                }
            } else {
                let abs = absolute(src);
                if !Path::new(&abs).exists() {
                    return Err(cz(
                        Code::InvalidArgument,
                        format!("path '{src}' does not exist"),
                    ));
                }
                VolOrFs::Fs(Mount {
                    kind: MountType::Virtiofs,
                    source: abs,
                    destination: dst,
                    options,
                    docker_volume: None,
                })
            }
        }
        _ => {
            return Err(cz(
                Code::InvalidArgument,
                format!("invalid volume format {spec}"),
            ))
        }
    };
    validate_mount(&m)?;
    Ok(m)
}

/// `Parser.mount` (`--mount`).
pub fn mount(spec: &str) -> CliResult<VolOrFs> {
    let parts = swift_split(spec, ',', usize::MAX, true);
    if parts.is_empty() {
        return Err(cz(
            Code::InvalidArgument,
            format!("invalid mount format: {spec}"),
        ));
    }
    let mut directives: Vec<(String, String)> = vec![("type".into(), "virtiofs".into())];
    let mut set = |k: &str, v: String| {
        if let Some(e) = directives.iter_mut().find(|(key, _)| key == k) {
            e.1 = v;
        } else {
            directives.push((k.to_string(), v));
        }
    };
    for part in &parts {
        let kv = swift_split(part, '=', 2, true);
        let mut key = kv[0].clone();
        let mut skip_value = false;
        match key.as_str() {
            "type" | "size" | "mode" => {}
            "source" | "src" => key = "source".into(),
            "destination" | "dst" | "target" => key = "destination".into(),
            "readonly" | "ro" => {
                key = "ro".into();
                skip_value = true;
            }
            _ => {
                return Err(cz(
                    Code::InvalidArgument,
                    format!("unknown directive {key} when parsing mount {spec}"),
                ))
            }
        }
        let mut value = String::new();
        if !skip_value {
            if kv.len() != 2 {
                return Err(cz(
                    Code::InvalidArgument,
                    format!("invalid directive format missing value {part} in {spec}"),
                ));
            }
            value = kv[1].clone();
        }
        set(&key, value);
    }
    let ty = directives
        .iter()
        .find(|(k, _)| k == "type")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let mut kind = MountType::Tmpfs;
    let mut source = String::new();
    let mut destination = String::new();
    let mut options: Vec<String> = Vec::new();
    let mut is_volume = false;
    let mut volume_name = String::new();
    // Swift iterates a dictionary here; the order of checks does not change the result
    // except for which error wins when several directives are wrong.
    for (key, val) in &directives {
        match key.as_str() {
            "type" => {
                let v = if val == "bind" {
                    "virtiofs"
                } else {
                    val.as_str()
                };
                match v {
                    "virtiofs" => kind = MountType::Virtiofs,
                    "tmpfs" => kind = MountType::Tmpfs,
                    "volume" => is_volume = true,
                    other => {
                        return Err(cz(
                            Code::InvalidArgument,
                            format!("unsupported mount type {other}"),
                        ))
                    }
                }
            }
            "ro" => options.push("ro".into()),
            "size" => {
                if ty != "tmpfs" {
                    return Err(cz(
                        Code::InvalidArgument,
                        format!("unsupported option size for {ty} mount"),
                    ));
                }
                let mib = memory_mib(val)?;
                let bytes = mib.checked_mul(1024 * 1024).ok_or_else(|| {
                    cz(
                        Code::InvalidArgument,
                        format!("overflow encountered when parsing memory string: {val}"),
                    )
                })?;
                options.push(format!("size={bytes}"));
            }
            "mode" => {
                if ty != "tmpfs" {
                    return Err(cz(
                        Code::InvalidArgument,
                        format!("unsupported option mode for {ty} mount"),
                    ));
                }
                options.push(format!("mode={val}"));
            }
            "source" => match ty.as_str() {
                "virtiofs" | "bind" => {
                    let abs = absolute(val);
                    let p = Path::new(&abs);
                    if !p.exists() {
                        return Err(cz(
                            Code::InvalidArgument,
                            format!("path '{val}' does not exist"),
                        ));
                    }
                    if !p.is_dir() {
                        return Err(cz(
                            Code::InvalidArgument,
                            format!("path '{val}' is not a directory"),
                        ));
                    }
                    source = abs;
                }
                "volume" => {
                    if !valid_volume_name(val) {
                        return Err(cz(
                            Code::InvalidArgument,
                            format!("invalid volume name '{val}': must match {VOLUME_PATTERN}"),
                        ));
                    }
                    volume_name = val.clone();
                    source = val.clone();
                }
                "tmpfs" => {
                    return Err(cz(
                        Code::InvalidArgument,
                        "cannot specify source for tmpfs mount",
                    ))
                }
                other => {
                    return Err(cz(
                        Code::InvalidArgument,
                        format!("unknown mount type {other}"),
                    ))
                }
            },
            "destination" => destination = val.clone(),
            other => {
                return Err(cz(
                    Code::InvalidArgument,
                    format!("unknown mount directive {other}"),
                ))
            }
        }
    }
    let m = if is_volume {
        let anonymous = volume_name.is_empty();
        VolOrFs::Volume {
            name: if anonymous { uuid() } else { volume_name },
            destination,
            options,
            anonymous,
        }
    } else {
        if matches!(kind, MountType::Tmpfs) {
            source = "tmpfs".into();
        }
        VolOrFs::Fs(Mount {
            kind,
            source,
            destination,
            options,
            docker_volume: None,
        })
    };
    validate_mount(&m)?;
    Ok(m)
}

/// `Parser.network`: (name, mac, mtu).
pub fn network(spec: &str) -> CliResult<(String, Option<String>, Option<u32>)> {
    if spec.is_empty() {
        return Err(cz(
            Code::InvalidArgument,
            "network specification cannot be empty",
        ));
    }
    let parts = swift_split(spec, ',', usize::MAX, false);
    let name = parts[0].clone();
    if name.is_empty() {
        return Err(cz(Code::InvalidArgument, "network name cannot be empty"));
    }
    let mut mac = None;
    let mut mtu = None;
    for part in &parts[1..] {
        let kv = swift_split(part, '=', 2, false);
        if kv.len() != 2 {
            return Err(cz(
                Code::InvalidArgument,
                format!("invalid property format '{part}' in network specification '{spec}'"),
            ));
        }
        match kv[0].as_str() {
            "mac" => {
                if kv[1].is_empty() {
                    return Err(cz(
                        Code::InvalidArgument,
                        "mac address value cannot be empty",
                    ));
                }
                mac = Some(kv[1].clone());
            }
            "mtu" => match kv[1].parse::<u32>() {
                Ok(v) if (1280..=65535).contains(&v) => mtu = Some(v),
                _ => {
                    return Err(cz(
                        Code::InvalidArgument,
                        format!(
                            "invalid mtu value '{}': must be between 1280 and 65535",
                            kv[1]
                        ),
                    ))
                }
            },
            other => {
                return Err(cz(
                    Code::InvalidArgument,
                    format!("unknown network property '{other}'. Available properties: mac, mtu"),
                ))
            }
        }
    }
    Ok((name, mac, mtu))
}

/// `Utility.validMACAddress`.
pub fn valid_mac(mac: &str) -> CliResult<()> {
    let b = mac.as_bytes();
    let ok = b.len() == 17
        && b.iter().enumerate().all(|(i, c)| {
            if i % 3 == 2 {
                *c == b':' || *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    if ok {
        Ok(())
    } else {
        Err(cz(
            Code::InvalidArgument,
            format!("invalid MAC address format {mac}, expected format: XX:XX:XX:XX:XX:XX"),
        ))
    }
}

/// `Parser.publishPort`, for the forms people write (`[ip:]host:container[/proto]`).
pub fn publish_port(text: &str) -> CliResult<PublishPort> {
    let invalid = || {
        cz(
            Code::InvalidArgument,
            format!("invalid publish value: {text}"),
        )
    };
    let (main, proto) = match text.rsplit_once('/') {
        Some((m, p)) => (m, p.to_lowercase()),
        None => (text, "tcp".to_string()),
    };
    if proto != "tcp" && proto != "udp" {
        return Err(cz(
            Code::InvalidArgument,
            format!("invalid publish protocol: {proto}"),
        ));
    }
    let pieces: Vec<&str> = main.rsplitn(3, ':').collect();
    let (host_ip, host, container) = match pieces.len() {
        2 => ("0.0.0.0".to_string(), pieces[1], pieces[0]),
        3 => (
            pieces[2].trim_matches(['[', ']']).to_string(),
            pieces[1],
            pieces[0],
        ),
        _ => return Err(invalid()),
    };
    let range = |s: &str, what: &str| -> CliResult<(u16, u16)> {
        let bad = || {
            cz(
                Code::InvalidArgument,
                format!("invalid publish {what} port: {s}"),
            )
        };
        let p: Vec<&str> = s.split('-').filter(|x| !x.is_empty()).collect();
        match p.len() {
            1 => {
                let a = p[0].parse::<u16>().map_err(|_| bad())?;
                Ok((a, a))
            }
            2 => Ok((
                p[0].parse::<u16>().map_err(|_| bad())?,
                p[1].parse::<u16>().map_err(|_| bad())?,
            )),
            _ => Err(bad()),
        }
    };
    let (hs, he) = range(host, "host")?;
    let (cs, ce) = range(container, "container")?;
    if hs <= 1 || hs > he {
        return Err(cz(
            Code::InvalidArgument,
            format!("invalid publish host port range: {host}"),
        ));
    }
    if cs <= 1 || cs > ce {
        return Err(cz(
            Code::InvalidArgument,
            format!("invalid publish container port range: {container}"),
        ));
    }
    if he - hs != ce - cs {
        return Err(cz(
            Code::InvalidArgument,
            format!("publish host and container port counts are not equal: {host}:{container}"),
        ));
    }
    Ok(PublishPort {
        host_address: host_ip,
        host_port: hs,
        container_port: cs,
        proto,
        count: he - hs + 1,
    })
}

pub fn publish_socket(text: &str) -> CliResult<PublishSocket> {
    let parts = swift_split(text, ':', usize::MAX, true);
    if parts.len() != 2 {
        return Err(cz(
            Code::InvalidArgument,
            format!("invalid publish-socket format {text}. Expected: host_path:container_path"),
        ));
    }
    Ok(PublishSocket {
        container_path: parts[1].clone(),
        host_path: absolute(&parts[0]),
    })
}

pub fn capabilities(raw: &[String]) -> Vec<String> {
    raw.iter()
        .map(|c| {
            let upper = c.to_uppercase();
            if upper == "ALL" || upper.starts_with("CAP_") {
                upper
            } else {
                format!("CAP_{upper}")
            }
        })
        .collect()
}

pub const DEFAULT_MASKED: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

pub const DEFAULT_READONLY: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// `Parser.maskedPaths` / `readonlyPaths`.
pub fn path_overrides(
    values: &[String],
    defaults: &[&str],
    flag: &str,
) -> CliResult<Option<Vec<String>>> {
    if values.is_empty() {
        return Ok(None);
    }
    let mut paths: Vec<String> = defaults.iter().map(|s| s.to_string()).collect();
    for value in values {
        let trimmed = value.trim_matches([' ', '\t']);
        if trimmed.to_uppercase() == "NONE" {
            paths.clear();
            continue;
        }
        if !trimmed.starts_with('/') {
            return Err(cz(
                Code::InvalidArgument,
                format!(
                    "invalid path '{value}' for --{flag}: path must be absolute, or the NONE sentinel"
                ),
            ));
        }
        let mut n = trimmed.to_string();
        while n.len() > 1 && n.ends_with('/') {
            n.pop();
        }
        if !paths.contains(&n) {
            paths.push(n);
        }
    }
    Ok(Some(paths))
}

/// `Signal(_:)` of Containerization: case-insensitive, optional `SIG`, or a number.
pub fn signal(name: &str) -> Result<i32, CliError> {
    const SIGNALS: &[(&str, i32)] = &[
        ("ABRT", 6),
        ("ALRM", 14),
        ("BUS", 7),
        ("CHLD", 17),
        ("CLD", 17),
        ("CONT", 18),
        ("FPE", 8),
        ("HUP", 1),
        ("ILL", 4),
        ("INT", 2),
        ("IO", 29),
        ("IOT", 6),
        ("KILL", 9),
        ("PIPE", 13),
        ("POLL", 29),
        ("PROF", 27),
        ("PWR", 30),
        ("QUIT", 3),
        ("SEGV", 11),
        ("STKFLT", 16),
        ("STOP", 19),
        ("SYS", 31),
        ("TERM", 15),
        ("TRAP", 5),
        ("TSTP", 20),
        ("TTIN", 21),
        ("TTOU", 22),
        ("URG", 23),
        ("USR1", 10),
        ("USR2", 12),
        ("VTALRM", 26),
        ("WINCH", 28),
        ("XCPU", 24),
        ("XFSZ", 25),
    ];
    let upper = name.to_uppercase();
    let upper = upper.strip_prefix("SIG").unwrap_or(&upper);
    let invalid = || cz(Code::Unknown, format!("invalid signal: {name}"));
    if let Ok(n) = upper.parse::<i32>() {
        if (1..=31).contains(&n) || (34..=64).contains(&n) {
            return Ok(n);
        }
        return Err(invalid());
    }
    SIGNALS
        .iter()
        .find(|(n, _)| *n == upper)
        .map(|(_, v)| *v)
        .ok_or_else(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_like_swift() {
        assert_eq!(swift_split("a=b=c", '=', 2, true), vec!["a", "b", "c"]);
        assert_eq!(swift_split("a==b", '=', 2, true), vec!["a", "b"]);
        assert_eq!(swift_split("a=", '=', 2, true), vec!["a"]);
        assert_eq!(swift_split("a=b=c=d", '=', 2, true), vec!["a", "b", "c=d"]);
        assert_eq!(
            swift_split("/a::/b", ':', usize::MAX, true),
            vec!["/a", "/b"]
        );
    }

    #[test]
    fn labels_reject_equals_in_values() {
        assert!(labels(&["a=b=c".into()]).is_err());
        assert_eq!(labels(&["a".into()]).unwrap()["a"], "");
        assert!(labels(&["".into()]).is_err());
    }

    #[test]
    fn memory_units() {
        assert_eq!(memory_mib("4G").unwrap(), 4096);
        assert_eq!(memory_mib("1.5g").unwrap(), 1536);
        assert_eq!(memory_mib("512").unwrap(), 0);
        assert_eq!(memory_mib("200MiB").unwrap(), 200);
        assert!(matches!(memory_mib("x"), Err(CliError::Plain(s)) if s == "invalid size"));
        assert!(matches!(memory_mib("4x"), Err(CliError::Plain(s)) if s == "invalid symbol: x"));
    }

    #[test]
    fn signals() {
        assert_eq!(signal("kill").unwrap(), 9);
        assert_eq!(signal("SIGTERM").unwrap(), 15);
        assert_eq!(signal("10").unwrap(), 10);
        assert!(signal("FOO").is_err());
    }
}
