//! The container commands: `run`, `create`, `start`, `exec`, `stop`, `kill`, `delete`,
//! `list`, `inspect`, `logs`. Each follows its Swift counterpart's order of checks, so the
//! first error a bad invocation meets is the same one.

use std::collections::HashSet;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::args::Values;
use crate::docker::{state_tag, Docker, ID_LABEL, LABEL_PREFIX, MARKER, STATE_LABEL};
use crate::errors::{cz, cz_cause, xpc_down, CliError, CliResult, Code};
use crate::image::{self, LocalImage};
use crate::json::{render, Keys, J};
use crate::model::{self, AttachmentConfig, Dns, Mount, MountType, Process, Record, User};
use crate::parser::{self, VolOrFs};
use crate::process::{foreground, Target};
use crate::settings::{Service, Settings};
use crate::state::{attachments, Store};

pub struct Ctx {
    pub settings: Settings,
    pub store: Store,
    pub docker: Docker,
    pub debug: bool,
}

pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `ContainerClient.list` when the API server is unreachable.
pub fn list_down() -> CliError {
    cz_cause(Code::InternalError, "failed to list containers", xpc_down())
}

fn not_found_server(id: &str) -> CliError {
    cz(Code::NotFound, format!("container with ID {id} not found"))
}

fn get_failed(id: &str) -> CliError {
    cz(
        Code::NotFound,
        format!("get failed: container {id} not found"),
    )
}

pub fn stdout_line(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}");
    let _ = out.flush();
}

impl Ctx {
    pub fn up(&self) -> bool {
        self.store.service(&self.settings) == Service::Running
    }

    pub fn docker_name(&self, id: &str) -> String {
        format!("stet-stand-in-{}-{id}", state_tag(&self.settings.state_dir))
    }

    fn volume_name(&self, name: &str) -> String {
        format!(
            "stet-stand-in-{}-vol-{name}",
            state_tag(&self.settings.state_dir)
        )
    }

    /// A `log.warning`/`log.info` line of the CLI's `StderrLogHandler`.
    pub fn log(&self, message: &str) {
        if self.debug {
            eprintln!("{} {message}", iso_millis());
        } else {
            eprintln!("{message}");
        }
    }

    fn start_delay(&self) {
        if self.settings.start_delay_ms > 0 {
            thread::sleep(Duration::from_millis(self.settings.start_delay_ms));
        }
    }
}

fn iso_millis() -> String {
    let t = now();
    let base = crate::json::iso8601(t);
    format!(
        "{}.{:03}Z",
        base.trim_end_matches('Z'),
        ((t.fract()) * 1000.0) as u32
    )
}

/// `ManagedContainer.nameValid`.
pub fn name_valid(id: &str) -> bool {
    let mut chars = id.chars();
    id.chars().count() <= 63
        && id.chars().count() >= 2
        && matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

fn progress_plain(v: &Values, has_progress_flag: bool) -> bool {
    if !has_progress_flag {
        return false;
    }
    // SAFETY: isatty on our stderr.
    let tty = unsafe { libc::isatty(2) } == 1;
    match v.opt("progress").as_deref().unwrap_or("auto") {
        "auto" => !tty,
        "plain" => true,
        _ => false,
    }
}

fn platform_from(v: &Values) -> CliResult<(String, String, Option<String>)> {
    let from_text = |p: &str| -> CliResult<(String, String, Option<String>)> {
        let parts: Vec<&str> = p.split('/').collect();
        match parts.as_slice() {
            [os, arch] => Ok((os.to_string(), image::normalize_arch(arch), None)),
            [os, arch, variant] => Ok((
                os.to_string(),
                image::normalize_arch(arch),
                Some(variant.to_string()),
            )),
            _ => Err(cz(Code::InvalidArgument, format!("invalid platform {p}"))),
        }
    };
    if let Some(p) = v.opt("platform") {
        return from_text(&p);
    }
    if let Ok(p) = std::env::var("CONTAINER_DEFAULT_PLATFORM") {
        if !p.is_empty() {
            return from_text(&p);
        }
    }
    let os = v.opt("os").unwrap_or_else(|| "linux".into());
    let arch = v
        .opt("arch")
        .map(|a| image::normalize_arch(&a))
        .unwrap_or_else(image::host_architecture);
    Ok((os, arch, None))
}

fn scheme_check(v: &Values) -> CliResult<()> {
    let s = v.opt("scheme").unwrap_or_else(|| "auto".into());
    if matches!(s.as_str(), "http" | "https" | "auto") {
        Ok(())
    } else {
        Err(cz(Code::InvalidArgument, format!("unsupported scheme {s}")))
    }
}

/// `Parser.process`.
fn init_process(v: &Values, img: &LocalImage) -> CliResult<Process> {
    let environment = parser::all_env(
        &img.config_strs("Env").unwrap_or_default(),
        &v.list("envFile"),
        &v.list("env"),
    )?;
    let working_directory = v
        .opt("cwd")
        .or_else(|| img.config_str("WorkingDir"))
        .unwrap_or_else(|| "/".into());
    let mut command: Vec<String> = Vec::new();
    let mut override_ep = false;
    if let Some(ep) = v.opt("entrypoint").filter(|e| !e.is_empty()) {
        command.push(ep);
        override_ep = true;
    } else if let Some(ep) = img.config_strs("Entrypoint").filter(|e| !e.is_empty()) {
        command = ep;
    }
    let arguments = v.list("arguments");
    if !arguments.is_empty() {
        command.extend(arguments);
    } else if let Some(cmd) = img.config_strs("Cmd").filter(|c| !c.is_empty()) {
        if !override_ep {
            command.extend(cmd);
        }
    }
    if command.is_empty() {
        return Err(cz(
            Code::InvalidArgument,
            "command/entrypoint not specified for container process",
        ));
    }
    let default_user = match img.config_str("User") {
        Some(u) => User::Raw(u),
        None => User::Id(0, 0),
    };
    let uid = v.opt("uid").and_then(|u| u.parse().ok());
    let gid = v.opt("gid").and_then(|g| g.parse().ok());
    let (user, groups) = parser::user(v.opt("user").as_deref(), uid, gid, default_user);
    let rlimits = parser::rlimits(&v.list("ulimits"))?;
    Ok(Process {
        executable: command[0].clone(),
        arguments: command[1..].to_vec(),
        environment,
        working_directory,
        terminal: v.flag("tty"),
        user,
        supplemental_groups: groups,
        rlimits,
    })
}

fn dedupe(items: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items
        .into_iter()
        .filter(|i| seen.insert(i.clone()))
        .collect()
}

fn csv_field(f: &str) -> String {
    if f.contains([',', '"']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

/// Resolves a named or anonymous volume to a Docker volume (created on first use).
fn resolve_volume(
    ctx: &Ctx,
    name: &str,
    destination: &str,
    options: &[String],
    anonymous: bool,
) -> CliResult<Mount> {
    let dv = ctx.volume_name(name);
    let exists = ctx
        .docker
        .output(&["volume".into(), "inspect".into(), dv.clone()])
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !exists {
        let mut args = vec![
            "volume".to_string(),
            "create".into(),
            "--label".into(),
            format!("{MARKER}=1"),
            "--label".into(),
            format!("{STATE_LABEL}={}", ctx.settings.state_dir.display()),
        ];
        if anonymous {
            args.push("--label".into());
            args.push("com.apple.container.resource.anonymous=".into());
        }
        args.push(dv.clone());
        ctx.docker.ok(&args)?;
        if !anonymous {
            ctx.log(&format!(
                "named volume was automatically created: [\"volume\": {name}]"
            ));
        }
    }
    Ok(Mount {
        kind: MountType::Volume {
            name: name.to_string(),
            format: "ext4".into(),
        },
        source: ctx
            .settings
            .state_dir
            .join("volumes")
            .join(name)
            .join("volume.img")
            .to_string_lossy()
            .into_owned(),
        destination: destination.to_string(),
        options: options.to_vec(),
        docker_volume: Some(dv),
    })
}

/// `Utility.containerConfigFromFlags`, plus the Docker arguments that realise it.
fn build(
    ctx: &Ctx,
    v: &Values,
    id: &str,
    plain: bool,
    total: u32,
) -> CliResult<(Record, LocalImage)> {
    let (os, arch, variant) = platform_from(v)?;
    scheme_check(v)?;
    if plain {
        eprintln!("[1/{total}] Fetching image [0s]");
    }
    let image_ref = v.opt("image").expect("image");
    let img = image::fetch(&ctx.settings, &ctx.docker, &image_ref, Some((&os, &arch)))?;
    if let Some(k) = v.opt("kernel") {
        let abs = parser::absolute(&k);
        if !Path::new(&abs).exists() {
            return Err(cz(
                Code::NotFound,
                format!("kernel file not found at path {abs}"),
            ));
        }
    }
    if let Some(init_image) = v.opt("initImage") {
        image::fetch(&ctx.settings, &ctx.docker, &init_image, None)?;
    }
    let process = init_process(v, &img)?;

    let cpus = match v.opt("cpus") {
        Some(c) => c.parse::<i64>().unwrap_or(4),
        None => 4,
    };
    let memory_in_bytes = match v.opt("memory") {
        Some(m) => (parser::memory_mib(&m)? as u64).wrapping_mul(1024 * 1024),
        None => 1024 * 1024 * 1024,
    };

    let mut mounts: Vec<Mount> = Vec::new();
    for t in dedupe(v.list("tmpFs")) {
        if t.is_empty() {
            return Err(cz(
                Code::InvalidArgument,
                "mount destination cannot be empty",
            ));
        }
        mounts.push(Mount {
            kind: MountType::Tmpfs,
            source: "tmpfs".into(),
            destination: t,
            options: vec![],
            docker_volume: None,
        });
    }
    let mut parsed: Vec<VolOrFs> = Vec::new();
    for spec in v.list("volumes") {
        parsed.push(parser::volume(&spec)?);
    }
    for spec in dedupe(v.list("mounts")) {
        parsed.push(parser::mount(&spec)?);
    }
    for item in parsed {
        match item {
            VolOrFs::Fs(m) => mounts.push(m),
            VolOrFs::Volume {
                name,
                destination,
                options,
                anonymous,
            } => mounts.push(resolve_volume(
                ctx,
                &name,
                &destination,
                &options,
                anonymous,
            )?),
        }
    }

    let shm_size = match v.opt("shmSize") {
        Some(s) => Some(parser::measurement_bytes(&s)? as u64),
        None => None,
    };

    let raw_networks = v.list("networks");
    let mut parsed_networks = Vec::new();
    for n in &raw_networks {
        parsed_networks.push(parser::network(n)?);
    }
    let networks: Vec<AttachmentConfig> = if raw_networks.iter().any(|n| n == "none") {
        if raw_networks.len() != 1 {
            return Err(cz(
                Code::Unsupported,
                "no other networks may be created along with network none",
            ));
        }
        vec![]
    } else if parsed_networks.is_empty() {
        vec![AttachmentConfig {
            network: "default".into(),
            hostname: fqdn(id),
            mac_address: None,
            mtu: Some(1280),
        }]
    } else {
        for (_, mac, _) in &parsed_networks {
            if let Some(m) = mac {
                parser::valid_mac(m)?;
            }
        }
        let mut out = Vec::new();
        for (i, (name, mac, mtu)) in parsed_networks.iter().enumerate() {
            out.push(AttachmentConfig {
                network: name.clone(),
                hostname: if i == 0 { fqdn(id) } else { id.to_string() },
                mac_address: mac.clone(),
                mtu: Some(mtu.unwrap_or(1280)),
            });
        }
        for n in &out {
            if n.network != "default" {
                return Err(cz(
                    Code::NotFound,
                    format!("network {} not found", n.network),
                ));
            }
        }
        out
    };

    let dns = if v.flag("dnsDisabled") {
        None
    } else {
        Some(Dns {
            nameservers: v.list("dnsNameservers"),
            domain: v.opt("dnsDomain"),
            search_domains: v.list("dnsSearch"),
            options: v.list("dnsOptions"),
        })
    };

    let labels = parser::labels(&v.list("labels"))?;
    let mut published_ports = Vec::new();
    for p in v.list("publishPorts") {
        published_ports.push(parser::publish_port(&p)?);
    }
    if published_ports.len() > 64 {
        return Err(cz(
            Code::InvalidArgument,
            "cannot exceed more than 64 port publish descriptors",
        ));
    }
    let mut seen = HashSet::new();
    for p in &published_ports {
        for off in 0..p.count {
            if !seen.insert(format!("{}/{}", p.host_port as u32 + off as u32, p.proto)) {
                return Err(cz(
                    Code::InvalidArgument,
                    "host ports for different publish port specs may not overlap",
                ));
            }
        }
    }
    let mut published_sockets = Vec::new();
    for s in v.list("publishSockets") {
        published_sockets.push(parser::publish_socket(&s)?);
    }
    let masked_paths = parser::path_overrides(
        &v.list("maskedPaths"),
        parser::DEFAULT_MASKED,
        "masked-path",
    )?;
    let readonly_paths = parser::path_overrides(
        &v.list("readonlyPaths"),
        parser::DEFAULT_READONLY,
        "read-only-path",
    )?;

    let record = Record {
        id: id.to_string(),
        docker_name: ctx.docker_name(id),
        image: model::ImageDesc {
            reference: img.reference.text(),
            digest: img.id(),
            media_type: "application/vnd.oci.image.index.v1+json".into(),
            size: img.size(),
        },
        platform: model::Platform {
            os,
            architecture: arch,
            variant,
        },
        mounts,
        published_ports,
        published_sockets,
        labels,
        networks,
        dns,
        rosetta: v.flag("rosetta"),
        init_process: process,
        cpus,
        memory_in_bytes,
        runtime_handler: v
            .opt("runtime")
            .unwrap_or_else(|| "container-runtime-linux".into()),
        virtualization: v.flag("virtualization"),
        ssh: v.flag("ssh"),
        read_only: v.flag("readOnly"),
        use_init: v.flag("useInit"),
        cap_add: parser::capabilities(&v.list("capAdd")),
        cap_drop: parser::capabilities(&v.list("capDrop")),
        shm_size,
        stop_signal: img.config_str("StopSignal"),
        masked_paths,
        readonly_paths,
        creation_date: now(),
        state: "stopped".into(),
        started_date: None,
        attachments: vec![],
        auto_remove: v.flag("remove"),
        seq: 0,
    };
    Ok((record, img))
}

fn fqdn(id: &str) -> String {
    if id.contains('.') {
        format!("{id}.")
    } else {
        id.to_string()
    }
}

fn host_cpus() -> i64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as i64)
        .unwrap_or(1)
}

/// `docker create` for a record.
fn docker_create(ctx: &Ctx, r: &Record, img: &LocalImage, interactive: bool) -> CliResult<()> {
    let mut a: Vec<String> = vec![
        "create".into(),
        "--name".into(),
        r.docker_name.clone(),
        "--label".into(),
        format!("{MARKER}=1"),
        "--label".into(),
        format!("{STATE_LABEL}={}", ctx.settings.state_dir.display()),
        "--label".into(),
        format!("{ID_LABEL}={}", r.id),
    ];
    for (k, v) in &r.labels {
        a.push("--label".into());
        a.push(format!("{LABEL_PREFIX}{k}={v}"));
    }
    let hostname = r
        .networks
        .first()
        .map(|n| n.hostname.trim_end_matches('.').to_string())
        .unwrap_or_else(|| r.id.clone());
    a.extend(["--hostname".into(), hostname]);
    if r.networks.is_empty() {
        a.extend(["--network".into(), "none".into()]);
    }
    for e in &r.init_process.environment {
        a.extend(["-e".into(), e.clone()]);
    }
    a.extend(["-w".into(), r.init_process.working_directory.clone()]);
    a.extend(["-u".into(), r.init_process.user.docker()]);
    for g in &r.init_process.supplemental_groups {
        a.extend(["--group-add".into(), g.to_string()]);
    }
    if r.cpus > 0 {
        a.extend(["--cpus".into(), r.cpus.min(host_cpus()).to_string()]);
    }
    a.extend(["--memory".into(), format!("{}b", r.memory_in_bytes)]);
    if interactive {
        a.push("-i".into());
    }
    if r.init_process.terminal {
        a.push("-t".into());
    }
    if r.use_init {
        a.push("--init".into());
    }
    if r.read_only {
        a.push("--read-only".into());
    }
    if r.auto_remove {
        a.push("--rm".into());
    }
    for m in &r.mounts {
        let ro = m.options.iter().any(|o| o == "ro");
        match &m.kind {
            MountType::Tmpfs => {
                let opts: Vec<&String> = m.options.iter().collect();
                let mut spec = m.destination.clone();
                if !opts.is_empty() {
                    spec += ":";
                    spec += &opts
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(",");
                }
                a.extend(["--tmpfs".into(), spec]);
            }
            MountType::Virtiofs => {
                let mut spec = format!(
                    "type=bind,{},{}",
                    csv_field(&format!("source={}", m.source)),
                    csv_field(&format!("target={}", m.destination))
                );
                if ro {
                    spec += ",readonly";
                }
                a.extend(["--mount".into(), spec]);
            }
            MountType::Volume { .. } => {
                let mut spec = format!(
                    "type=volume,{},{}",
                    csv_field(&format!(
                        "source={}",
                        m.docker_volume.clone().unwrap_or_default()
                    )),
                    csv_field(&format!("target={}", m.destination))
                );
                if ro {
                    spec += ",readonly";
                }
                a.extend(["--mount".into(), spec]);
            }
        }
    }
    for l in &r.init_process.rlimits {
        if let Some(name) = parser::docker_ulimit_name(&l.limit) {
            let f = |x: u64| {
                if x == u64::MAX {
                    "-1".to_string()
                } else {
                    x.to_string()
                }
            };
            a.extend([
                "--ulimit".into(),
                format!("{name}={}:{}", f(l.soft), f(l.hard)),
            ]);
        }
    }
    for c in &r.cap_add {
        a.extend(["--cap-add".into(), c.clone()]);
    }
    for c in &r.cap_drop {
        a.extend(["--cap-drop".into(), c.clone()]);
    }
    if let Some(s) = r.shm_size {
        a.extend(["--shm-size".into(), format!("{s}b")]);
    }
    a.extend(["--entrypoint".into(), r.init_process.executable.clone()]);
    a.push(img.id());
    a.extend(r.init_process.arguments.iter().cloned());
    ctx.docker.ok(&a).map(|_| ())
}

fn write_cidfile(path: &str, id: &str) -> CliResult<()> {
    std::fs::write(path, id).map_err(|e| {
        cz(
            Code::InternalError,
            format!(
                "failed to create cidfile at {path}: {}",
                e.raw_os_error().unwrap_or(0)
            ),
        )
    })
}

/// Marks a record running after `docker start`, with its network attachments.
fn mark_running(ctx: &Ctx, id: &str) -> CliResult<()> {
    let _lock = ctx.store.lock()?;
    if let Some(mut r) = ctx.store.load(id) {
        r.state = "running".into();
        r.started_date = Some(now());
        let info = ctx.docker.containers(std::slice::from_ref(&r.docker_name));
        if let Some(i) = info.get(&r.docker_name) {
            r.attachments = attachments(&r, i);
        }
        ctx.store.save(&r)?;
    }
    Ok(())
}

/// The exit monitor: the init process is gone.
fn mark_exited(ctx: &Ctx, id: &str) {
    if let Ok(_lock) = ctx.store.lock() {
        if let Some(mut r) = ctx.store.load(id) {
            if r.auto_remove {
                ctx.store.remove(id);
                let _ = ctx
                    .docker
                    .output(&["rm".into(), "-f".into(), r.docker_name.clone()]);
            } else {
                r.state = "stopped".into();
                r.attachments.clear();
                let _ = ctx.store.save(&r);
            }
        }
    }
}

fn start_error(stderr: &str, executable: &str) -> CliError {
    if stderr.contains("executable file not found") || stderr.contains("no such file or directory")
    {
        cz(
            Code::InternalError,
            format!("failed to find target executable {executable}"),
        )
    } else {
        cz(
            Code::InternalError,
            format!("stand-in: docker start failed: {}", stderr.trim()),
        )
    }
}

/// `container run` and `container create`.
pub fn run_or_create(ctx: &Ctx, v: &Values, run: bool) -> CliResult<i32> {
    if !ctx.up() {
        return Err(xpc_down());
    }
    let plain = progress_plain(v, run);
    let total = if run { 6 } else { 3 };
    let id = v.opt("name").unwrap_or_else(parser::uuid);
    let lock = ctx.store.lock()?;
    if !name_valid(&id) {
        return Err(cz(
            Code::InvalidArgument,
            format!("container ID {id} is not a valid container ID"),
        ));
    }
    if run && ctx.store.get(&ctx.docker, &id).is_some() {
        return Err(cz(
            Code::Exists,
            format!("container with id {id} already exists"),
        ));
    }
    let (mut record, img) = build(ctx, v, &id, plain, total)?;
    // ContainersService.create
    if !run && ctx.store.get(&ctx.docker, &id).is_some() {
        return Err(cz(Code::Exists, format!("container already exists: {id}")));
    }
    if record.memory_in_bytes < 200 * 1024 * 1024 {
        return Err(cz(
            Code::InvalidArgument,
            format!(
                "minimum memory amount allowed is 200 MiB (got {} bytes)",
                record.memory_in_bytes
            ),
        ));
    }
    let interactive = v.flag("interactive");
    // A leftover Docker container of a deleted record would block the name.
    let _ = ctx
        .docker
        .output(&["rm".into(), "-f".into(), record.docker_name.clone()]);
    docker_create(ctx, &record, &img, interactive)?;
    record.seq = ctx.store.next_seq();
    ctx.store.save(&record)?;
    drop(lock);

    let cidfile = v.opt("cidfile").filter(|c| !c.is_empty());
    if !run {
        if let Some(path) = cidfile {
            write_cidfile(&path, &id)?;
        }
        stdout_line(&id);
        return Ok(0);
    }

    if let Some(path) = &cidfile {
        if let Err(e) = write_cidfile(path, &id) {
            delete_quietly(ctx, &id);
            return Err(e);
        }
    }
    ctx.start_delay();
    if plain {
        eprintln!("[6/{total}] Starting container [0s]");
    }
    start_container(
        ctx,
        &id,
        &record,
        v.flag("detach"),
        interactive,
        delete_quietly,
    )
}

/// Starts a made container: detached, it prints the id; attached, it streams the init
/// process and exits with its code. When it cannot start, or the foreground run fails,
/// `undo` puts the record back (`run` deletes what it made; `start` marks it exited).
fn start_container(
    ctx: &Ctx,
    id: &str,
    record: &Record,
    detach: bool,
    interactive: bool,
    undo: fn(&Ctx, &str),
) -> CliResult<i32> {
    if detach {
        let out = ctx
            .docker
            .output(&["start".into(), record.docker_name.clone()])?;
        if !out.status.success() {
            undo(ctx, id);
            return Err(start_error(
                &String::from_utf8_lossy(&out.stderr),
                &record.init_process.executable,
            ));
        }
        mark_running(ctx, id)?;
        stdout_line(id);
        return Ok(0);
    }
    mark_running_now(ctx, id)?;
    let mut cmd = ctx.docker.command();
    cmd.args(["start", "-a"]);
    if interactive {
        cmd.arg("-i");
    }
    cmd.arg(&record.docker_name);
    let result = foreground(
        cmd,
        Target::Init {
            docker_bin: ctx.docker.bin.clone(),
            name: record.docker_name.clone(),
        },
        record.init_process.terminal,
        interactive,
        &record.init_process.executable,
    );
    match result {
        Ok(code) => {
            mark_exited(ctx, id);
            Err(CliError::Exit(code))
        }
        Err(e) => {
            undo(ctx, id);
            Err(e)
        }
    }
}

/// `running` without waiting for Docker to report addresses (foreground runs).
fn mark_running_now(ctx: &Ctx, id: &str) -> CliResult<()> {
    let _lock = ctx.store.lock()?;
    if let Some(mut r) = ctx.store.load(id) {
        r.state = "running".into();
        r.started_date = Some(now());
        ctx.store.save(&r)?;
    }
    Ok(())
}

fn delete_quietly(ctx: &Ctx, id: &str) {
    if let Ok(_lock) = ctx.store.lock() {
        if let Some(r) = ctx.store.load(id) {
            let _ = ctx
                .docker
                .output(&["rm".into(), "-f".into(), r.docker_name.clone()]);
            ctx.store.remove(id);
        }
    }
}

/// `container start`.
pub fn start(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let id = v.opt("containerId").expect("id");
    let attach = v.flag("attach");
    let interactive = v.flag("interactive");
    let detach = !attach && !interactive;
    if !ctx.up() {
        return Err(list_down());
    }
    let record = {
        let _lock = ctx.store.lock()?;
        ctx.store
            .get(&ctx.docker, &id)
            .ok_or_else(|| get_failed(&id))?
    };
    if record.state == "running" {
        if !detach {
            return Err(cz(
                Code::InvalidArgument,
                "attach is currently unsupported on already running containers",
            ));
        }
        stdout_line(&id);
        return Ok(0);
    }
    for m in &record.mounts {
        if matches!(m.kind, MountType::Virtiofs) && !Path::new(&m.source).exists() {
            return Err(cz(
                Code::InvalidState,
                format!("mount source path '{}' does not exist", m.source),
            ));
        }
    }
    ctx.start_delay();
    start_container(ctx, &id, &record, detach, interactive, mark_exited)
}

/// `container exec`.
pub fn exec(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let id = v.opt("containerId").expect("id");
    if !ctx.up() {
        return Err(list_down());
    }
    let (record, info) = {
        let _lock = ctx.store.lock()?;
        ctx.store
            .get_with_info(&ctx.docker, &id)
            .ok_or_else(|| get_failed(&id))?
    };
    if record.state != "running" {
        return Err(cz(
            Code::InvalidState,
            format!("container {id} is not running"),
        ));
    }
    let argv = v.list("arguments");
    let Some(executable) = argv.first().cloned() else {
        return Err(cz(Code::InvalidArgument, "no command specified for exec"));
    };
    let tty = v.flag("tty");
    let interactive = v.flag("interactive");
    let extra_env = parser::all_env(&[], &v.list("envFile"), &v.list("env"))?;
    let uid = v.opt("uid").and_then(|u| u.parse().ok());
    let gid = v.opt("gid").and_then(|g| g.parse().ok());
    let (user, _groups) = parser::user(
        v.opt("user").as_deref(),
        uid,
        gid,
        record.init_process.user.clone(),
    );

    let mut a: Vec<String> = vec!["exec".into()];
    if interactive {
        a.push("-i".into());
    }
    if tty {
        a.push("-t".into());
    }
    if v.flag("detach") {
        a.push("-d".into());
    }
    for e in &extra_env {
        a.extend(["-e".into(), e.clone()]);
    }
    if let Some(cwd) = v.opt("cwd") {
        a.extend(["-w".into(), cwd]);
    }
    if user != record.init_process.user {
        a.extend(["-u".into(), user.docker()]);
    }
    a.push(record.docker_name.clone());
    a.extend(argv.iter().cloned());

    if v.flag("detach") {
        let out = ctx.docker.output(&a)?;
        if !out.status.success() {
            return Err(start_error(
                &String::from_utf8_lossy(&out.stderr),
                &executable,
            ));
        }
        stdout_line(&id);
        return Ok(0);
    }
    let init_pid = info.as_ref().and_then(Docker::pid);
    let mut cmd = ctx.docker.command();
    cmd.args(&a);
    let code = foreground(
        cmd,
        Target::Exec {
            init_pid,
            argv: argv.clone(),
        },
        tty,
        interactive,
        &executable,
    )?;
    Err(CliError::Exit(code))
}

/// Waits for a container to stop, up to `limit`; true when it did.
fn wait_stopped(docker: &Docker, name: &str, limit: Duration) -> bool {
    let Ok(mut child) = docker
        .command()
        .args(["wait", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let start = Instant::now();
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        if start.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn stop_one(ctx: &Ctx, id: &str, signal: Option<&str>, time: i32) -> CliResult<()> {
    let wrap = |e: CliError| cz_cause(Code::InternalError, "failed to stop container", e);
    let record = {
        let _lock = ctx.store.lock()?;
        let Some(mut r) = ctx.store.get(&ctx.docker, id) else {
            return Err(wrap(not_found_server(id)));
        };
        if r.state == "stopped" {
            return Ok(());
        }
        let name = signal
            .map(str::to_string)
            .or_else(|| r.stop_signal.clone())
            .unwrap_or_else(|| "SIGTERM".into());
        let signo = parser::signal(&name).map_err(wrap)?;
        r.state = "stopping".into();
        ctx.store.save(&r)?;
        (r, signo)
    };
    let (r, signo) = record;
    let _ = ctx.docker.output(&[
        "kill".into(),
        "--signal".into(),
        signo.to_string(),
        r.docker_name.clone(),
    ]);
    let limit = Duration::from_secs(time.max(0) as u64);
    if !wait_stopped(&ctx.docker, &r.docker_name, limit) {
        let _ = ctx.docker.output(&[
            "kill".into(),
            "--signal".into(),
            "KILL".into(),
            r.docker_name.clone(),
        ]);
        wait_stopped(&ctx.docker, &r.docker_name, Duration::from_secs(10));
    }
    mark_exited(ctx, id);
    Ok(())
}

/// `container stop`.
pub fn stop(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let ids = if v.flag("all") {
        if !ctx.up() {
            return Err(list_down());
        }
        let _lock = ctx.store.lock()?;
        let all = ctx.store.all();
        ctx.store
            .reconcile(&ctx.docker, all)
            .into_iter()
            .map(|r| r.id)
            .collect()
    } else {
        v.list("containerIds")
    };
    let signal = v.opt("signal");
    let time: i32 = v.opt("time").and_then(|t| t.parse().ok()).unwrap_or(5);
    let mut errors = Vec::new();
    for id in ids {
        let res = if ctx.up() {
            stop_one(ctx, &id, signal.as_deref(), time)
        } else {
            Err(cz_cause(
                Code::InternalError,
                "failed to stop container",
                xpc_down(),
            ))
        };
        match res {
            Ok(()) => stdout_line(&id),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(0)
    } else {
        Err(CliError::Aggregate(errors))
    }
}

/// `container kill`.
pub fn kill(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let ids: Vec<String> = if v.flag("all") {
        if !ctx.up() {
            return Err(list_down());
        }
        let _lock = ctx.store.lock()?;
        let all = ctx.store.all();
        ctx.store
            .reconcile(&ctx.docker, all)
            .into_iter()
            .filter(|r| r.state == "running")
            .map(|r| r.id)
            .collect()
    } else {
        v.list("containerIds")
    };
    let signal = v.opt("signal").unwrap_or_else(|| "KILL".into());
    let mut errors = Vec::new();
    for id in ids {
        let wrap = |e: CliError| cz_cause(Code::InternalError, "failed to kill container", e);
        let res = (|| -> CliResult<()> {
            if !ctx.up() {
                return Err(wrap(xpc_down()));
            }
            let r = {
                let _lock = ctx.store.lock()?;
                ctx.store
                    .get(&ctx.docker, &id)
                    .ok_or_else(|| wrap(not_found_server(&id)))?
            };
            if r.state == "stopped" {
                return Err(wrap(cz(
                    Code::InvalidState,
                    "no runtime client exists: container is stopped",
                )));
            }
            let signo = parser::signal(&signal).map_err(wrap)?;
            let _ = ctx.docker.output(&[
                "kill".into(),
                "--signal".into(),
                signo.to_string(),
                r.docker_name.clone(),
            ]);
            if signo == 9 {
                wait_stopped(&ctx.docker, &r.docker_name, Duration::from_secs(10));
                mark_exited(ctx, &id);
            }
            Ok(())
        })();
        match res {
            Ok(()) => stdout_line(&id),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(0)
    } else {
        Err(CliError::Aggregate(errors))
    }
}

/// `container delete`.
pub fn delete(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let force = v.flag("force");
    let ids: Vec<String> = if v.flag("all") {
        if !ctx.up() {
            return Err(list_down());
        }
        let _lock = ctx.store.lock()?;
        let all = ctx.store.all();
        ctx.store
            .reconcile(&ctx.docker, all)
            .into_iter()
            .filter(|r| force || r.state != "running")
            .map(|r| r.id)
            .collect()
    } else {
        dedupe(v.list("containerIds"))
    };
    let mut errors = Vec::new();
    for id in ids {
        let wrap = |e: CliError| cz_cause(Code::InternalError, "failed to delete container", e);
        let res = (|| -> CliResult<()> {
            if !ctx.up() {
                return Err(wrap(xpc_down()));
            }
            let _lock = ctx.store.lock()?;
            let r = ctx
                .store
                .get(&ctx.docker, &id)
                .ok_or_else(|| wrap(not_found_server(&id)))?;
            match r.state.as_str() {
                "running" if !force => Err(wrap(cz(
                    Code::InvalidState,
                    format!("container {id} is running and can not be deleted"),
                ))),
                "stopping" => Err(wrap(cz(
                    Code::InvalidState,
                    format!("container {id} is stopping and can not be deleted"),
                ))),
                _ => {
                    let _ = ctx
                        .docker
                        .output(&["rm".into(), "-f".into(), r.docker_name.clone()]);
                    ctx.store.remove(&id);
                    Ok(())
                }
            }
        })();
        match res {
            Ok(()) => stdout_line(&id),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(0)
    } else {
        Err(CliError::Aggregate(errors))
    }
}

fn emit(s: &str) {
    if !s.is_empty() {
        stdout_line(s);
    }
}

/// `container list`.
pub fn list(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    if !ctx.up() {
        return Err(list_down());
    }
    let records = {
        let _lock = ctx.store.lock()?;
        let all = ctx.store.all();
        ctx.store.reconcile(&ctx.docker, all)
    };
    let format = v.opt("format").unwrap_or_else(|| "table".into());
    let include_stopped = v.flag("all") || (ctx.settings.json_ignores_all && format == "json");
    let records: Vec<Record> = records
        .into_iter()
        .filter(|r| include_stopped || r.state == "running")
        .collect();
    let v1 = ctx.settings.v1();
    let payload = || {
        if v1 {
            J::Arr(records.iter().map(model::managed_json).collect())
        } else {
            J::Arr(records.iter().map(model::printable_json).collect())
        }
    };
    match format.as_str() {
        "json" => emit(&model::list_json(&records, v1, false)),
        "yaml" => emit(&model::yaml(&payload())),
        "toml" => emit(&model::toml_text(&payload())),
        _ => {
            if v.flag("quiet") {
                emit(
                    &records
                        .iter()
                        .map(|r| r.id.clone())
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
            } else {
                emit(&model::list_table(&records, v1));
            }
        }
    }
    Ok(0)
}

/// `container inspect`.
pub fn inspect(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    if !ctx.up() {
        return Err(list_down());
    }
    let ids = v.list("containerIds");
    let records = {
        let _lock = ctx.store.lock()?;
        let all = ctx.store.all();
        ctx.store.reconcile(&ctx.docker, all)
    };
    let found: Vec<Record> = records
        .into_iter()
        .filter(|r| ids.contains(&r.id))
        .collect();
    if ctx.settings.v1() {
        let unique: HashSet<&String> = ids.iter().collect();
        if found.len() != unique.len() {
            let mut missing: Vec<&String> = unique
                .into_iter()
                .filter(|i| !found.iter().any(|r| &&r.id == i))
                .collect();
            missing.sort();
            return Err(cz(
                Code::NotFound,
                format!(
                    "container not found: {}",
                    missing
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        emit(&model::list_json(&found, true, true));
    } else {
        emit(&render(
            &J::Arr(found.iter().map(model::printable_json).collect()),
            false,
            Keys::Hashed,
        ));
    }
    Ok(0)
}

/// `container logs`.
pub fn logs(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let id = v.opt("containerId").expect("id");
    let wrap = |e: CliError| {
        cz_cause(
            Code::InternalError,
            format!("failed to get logs for container {id}"),
            e,
        )
    };
    if !ctx.up() {
        return Err(wrap(xpc_down()));
    }
    let record = {
        let _lock = ctx.store.lock()?;
        ctx.store.get(&ctx.docker, &id)
    };
    let Some(record) = record else {
        return Err(wrap(cz(
            Code::InternalError,
            format!(
                "failed to open container logs: {}",
                not_found_server(&id).description()
            ),
        )));
    };
    let follow = v.flag("follow");
    let n: Option<i64> = v.opt("numLines").and_then(|n| n.parse().ok());
    if v.flag("boot") {
        // No VM, no boot log.
        if follow {
            loop {
                thread::sleep(Duration::from_secs(3600));
            }
        }
        return Ok(0);
    }
    let mut args = vec!["logs".to_string()];
    if follow {
        args.push("--follow".into());
        if let Some(n) = n {
            args.extend(["--tail".into(), n.to_string()]);
        }
        args.push(record.docker_name.clone());
        // Both streams of the container end up in one log, as in the real log file.
        let stdout_fd = std::os::fd::AsFd::as_fd(&std::io::stdout())
            .try_clone_to_owned()
            .map_err(|e| cz(Code::InternalError, format!("stand-in: {e}")))?;
        let _ = ctx
            .docker
            .command()
            .args(&args)
            .stdout(Stdio::inherit())
            .stderr(Stdio::from(stdout_fd))
            .status();
        // `container logs -f` does not end when the container stops.
        loop {
            thread::sleep(Duration::from_secs(3600));
        }
    }
    args.push(record.docker_name.clone());
    let (reader, writer) = pipe()?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| cz(Code::InternalError, format!("stand-in: {e}")))?;
    let mut child = ctx
        .docker
        .command()
        .args(&args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer2))
        .spawn()
        .map_err(|e| cz(Code::InternalError, format!("stand-in: {e}")))?;
    let mut text = String::new();
    {
        use std::io::Read;
        let mut reader = std::fs::File::from(reader);
        let _ = reader.read_to_string(&mut text);
    }
    let _ = child.wait();
    match n {
        Some(n) => {
            let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
            let start = lines.len().saturating_sub(n.max(0) as usize);
            for l in &lines[start..] {
                stdout_line(l);
            }
        }
        None => {
            if !text.is_empty() {
                stdout_line(text.trim_matches(['\n', '\r']));
            }
        }
    }
    Ok(0)
}

/// Stops every container (for `system stop`).
pub fn stop_all_for_shutdown(ctx: &Ctx) -> Vec<String> {
    let records = match ctx.store.lock() {
        Ok(_lock) => {
            let all = ctx.store.all();
            ctx.store.reconcile(&ctx.docker, all)
        }
        Err(_) => vec![],
    };
    let mut stopped = Vec::new();
    for r in records {
        if stop_one(ctx, &r.id, None, 5).is_ok() {
            stopped.push(r.id);
        }
    }
    stopped
}

/// A pipe (read end, write end), both close-on-exec.
fn pipe() -> CliResult<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills two descriptors that we then own.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(cz(Code::InternalError, "stand-in: pipe failed"));
    }
    // SAFETY: fresh descriptors from pipe2.
    unsafe { Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}
