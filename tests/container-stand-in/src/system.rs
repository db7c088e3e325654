//! `container system start|stop|status|version`, `container --version`, and the image
//! commands.

use std::path::Path;

use crate::args::Values;
use crate::errors::{cz, xpc_down, CliError, CliResult, Code};
use crate::image::{self, Reference};
use crate::json::{render, Keys, J};
use crate::model;
use crate::ops::{self, stdout_line, Ctx};
use crate::settings::Service;

pub const COMMIT: &str = "0000000";

pub fn version_line(app: &str, version: &str) -> String {
    format!("{app} version {version} (build: release, commit: {COMMIT})")
}

fn keys(ctx: &Ctx) -> Keys {
    if ctx.settings.v1() {
        Keys::Sorted
    } else {
        Keys::Hashed
    }
}

fn with_slash(p: &Path) -> String {
    let s = p.to_string_lossy().into_owned();
    if s.ends_with('/') {
        s
    } else {
        format!("{s}/")
    }
}

fn render_formatted(ctx: &Ctx, format: &str, payload: &J, table: impl FnOnce() -> String) {
    let out = match format {
        "json" => render(payload, false, keys(ctx)),
        "yaml" => model::yaml(payload),
        "toml" => model::toml_text(payload),
        _ => table(),
    };
    if !out.is_empty() {
        stdout_line(&out);
    }
}

/// `container system status`.
pub fn status(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let format = v.opt("format").unwrap_or_else(|| "table".into());
    let prefix = v
        .opt("prefix")
        .unwrap_or_else(|| "com.apple.container.".into());
    let empty_status = |status: &str| {
        J::obj()
            .set("status", J::s(status))
            .set("appRoot", J::s(""))
            .set("installRoot", J::s(""))
            .set("apiServerVersion", J::s(""))
            .set("apiServerCommit", J::s(""))
            .set("apiServerBuild", J::s(""))
            .set("apiServerAppName", J::s(""))
            .done()
    };
    if !ctx.up() || prefix != "com.apple.container." {
        render_formatted(ctx, &format, &empty_status("unregistered"), || {
            "apiserver is not running and not registered with launchd".into()
        });
        return Err(CliError::Exit(1));
    }
    let app_root = with_slash(&ctx.settings.state_dir);
    let install_root = with_slash(ctx.settings.exe_dir.parent().unwrap_or(Path::new("/")));
    let server_version = version_line("container-apiserver", &ctx.settings.version);
    let payload = J::obj()
        .set("status", J::s("running"))
        .set("appRoot", J::s(&app_root))
        .set("installRoot", J::s(&install_root))
        .set("apiServerVersion", J::s(&server_version))
        .set("apiServerCommit", J::s(COMMIT))
        .set("apiServerBuild", J::s("release"))
        .set("apiServerAppName", J::s("container-apiserver"))
        .done();
    render_formatted(ctx, &format, &payload, || {
        model::table(&[
            vec!["FIELD".into(), "VALUE".into()],
            vec!["status".into(), "running".into()],
            vec!["appRoot".into(), app_root.clone()],
            vec!["installRoot".into(), install_root.clone()],
            vec!["logRoot".into(), String::new()],
            vec!["apiserver.version".into(), server_version.clone()],
            vec!["apiserver.commit".into(), COMMIT.into()],
            vec!["apiserver.build".into(), "release".into()],
            vec!["apiserver.appName".into(), "container-apiserver".into()],
        ])
    });
    Ok(0)
}

/// `container system start`: registers the (pretend) API server.
pub fn start(ctx: &Ctx, _v: &Values) -> CliResult<i32> {
    ctx.log("Launching container-apiserver...");
    ctx.store.set_service(Service::Running)?;
    ctx.log("Testing access to container-apiserver...");
    ctx.log("Verifying machine API server is running...");
    Ok(0)
}

fn stream_log(message: &str, metadata: &str) {
    let t = ops::now();
    let base = crate::json::iso8601(t);
    let stamp = format!("{}+0000", base.trim_end_matches('Z'));
    let meta = if metadata.is_empty() {
        String::new()
    } else {
        format!(" {metadata}")
    };
    stdout_line(&format!(
        "{stamp} info com.apple.container.cli :{meta} [ContainerCommands] {message}"
    ));
}

/// `container system stop`: stops every container, then the service.
pub fn stop(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let prefix = v
        .opt("prefix")
        .unwrap_or_else(|| "com.apple.container.".into());
    stream_log("checking if APIServer is alive", "");
    if !ctx.up() {
        stream_log("APIServer health check failed, skipping bootout", "");
        return Ok(0);
    }
    stream_log("stopping containers", "stopTimeoutSeconds=5");
    for id in ops::stop_all_for_shutdown(ctx) {
        stdout_line(&id);
    }
    stream_log("waiting for containers to exit", "");
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    stream_log(
        "stopping service",
        &format!("label=gui/{uid}/{prefix}apiserver"),
    );
    ctx.store.set_service(Service::Down)?;
    Ok(0)
}

/// `container system version`.
pub fn version(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let format = v.opt("format").unwrap_or_else(|| "table".into());
    let mut rows: Vec<(String, String, String, String)> = vec![(
        "container".into(),
        ctx.settings.version.clone(),
        "release".into(),
        COMMIT.into(),
    )];
    if ctx.up() {
        rows.push((
            "container-apiserver".into(),
            version_line("container-apiserver", &ctx.settings.version),
            "release".into(),
            COMMIT.into(),
        ));
    }
    let payload = J::Arr(
        rows.iter()
            .map(|(app, ver, build, commit)| {
                J::obj()
                    .set("version", J::s(ver))
                    .set("buildType", J::s(build))
                    .set("commit", J::s(commit))
                    .set("appName", J::s(app))
                    .done()
            })
            .collect(),
    );
    render_formatted(ctx, &format, &payload, || {
        let mut t = vec![vec![
            "COMPONENT".to_string(),
            "VERSION".into(),
            "BUILD".into(),
            "COMMIT".into(),
        ]];
        for (app, ver, build, commit) in &rows {
            t.push(vec![
                app.clone(),
                ver.clone(),
                build.clone(),
                commit.clone(),
            ]);
        }
        model::table(&t)
    });
    Ok(0)
}

/// `container image list`.
pub fn image_list(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    if !ctx.up() {
        return Err(xpc_down());
    }
    let quiet = v.flag("quiet");
    let verbose = v.flag("verbose");
    if quiet && verbose {
        return Err(cz(
            Code::InvalidArgument,
            "cannot use flag --quiet and --verbose together",
        ));
    }
    let format = v.opt("format").unwrap_or_else(|| "table".into());
    let images = image::list(&ctx.docker)?;
    if quiet && format == "table" {
        for i in &images {
            stdout_line(&i.reference.display());
        }
        return Ok(0);
    }
    let payload = J::Arr(images.iter().map(|i| i.resource_json()).collect());
    render_formatted(ctx, &format, &payload, || {
        let trim = |d: &str| -> String {
            let hex = d.split_once(':').map(|(_, h)| h).unwrap_or(d);
            hex.chars().take(12).collect()
        };
        let split = |r: &Reference| -> (String, String) {
            let shown = r.display();
            let (name, tag) = match &r.tag {
                Some(t) => (
                    shown
                        .strip_suffix(&format!(":{t}"))
                        .unwrap_or(&shown)
                        .to_string(),
                    t.clone(),
                ),
                None => (shown.clone(), "<none>".into()),
            };
            (name, tag)
        };
        let mut rows = if verbose {
            vec![vec![
                "NAME".to_string(),
                "TAG".into(),
                "INDEX DIGEST".into(),
                "OS".into(),
                "ARCH".into(),
                "VARIANT".into(),
                "FULL SIZE".into(),
                "CREATED".into(),
                "MANIFEST DIGEST".into(),
            ]]
        } else {
            vec![vec!["NAME".to_string(), "TAG".into(), "DIGEST".into()]]
        };
        for i in &images {
            let (name, tag) = split(&i.reference);
            if verbose {
                rows.push(vec![
                    name,
                    tag,
                    trim(&i.id()),
                    i.os(),
                    i.architecture(),
                    i.variant().unwrap_or_default(),
                    format!("{} bytes", i.size()),
                    i.inspect
                        .get("Created")
                        .and_then(|c| c.as_str())
                        .unwrap_or("")
                        .to_string(),
                    trim(&i.id()),
                ]);
            } else {
                rows.push(vec![name, tag, trim(&i.id())]);
            }
        }
        model::table(&rows)
    });
    Ok(0)
}

/// `container image inspect`.
pub fn image_inspect(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    if !ctx.up() {
        return Err(xpc_down());
    }
    let mut names = v.list("images");
    names.sort();
    names.dedup();
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for n in &names {
        match image::fetch(&ctx.settings, &ctx.docker, n, None) {
            Ok(i) => found.push(i),
            Err(_) => missing.push(n.clone()),
        }
    }
    if !missing.is_empty() {
        missing.sort();
        return Err(cz(
            Code::NotFound,
            format!("image not found: {}", missing.join(", ")),
        ));
    }
    stdout_line(&image::resources_json(&found, true));
    Ok(0)
}

/// `container image pull`: succeeds for images Docker has, fails as the registry would for
/// the rest. Nothing is downloaded.
pub fn image_pull(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    if !ctx.up() {
        return Err(xpc_down());
    }
    let reference = v.opt("reference").expect("reference");
    let platform = if let Some(p) = v.opt("platform") {
        let parts: Vec<&str> = p.split('/').collect();
        if parts.len() < 2 {
            return Err(cz(Code::InvalidArgument, format!("invalid platform {p}")));
        }
        Some((parts[0].to_string(), parts[1].to_string()))
    } else if let Some(a) = v.opt("arch") {
        Some((v.opt("os").unwrap_or_else(|| "linux".into()), a))
    } else {
        v.opt("os").map(|os| (os, image::host_architecture()))
    };
    let scheme = v.opt("scheme").unwrap_or_else(|| "auto".into());
    if !matches!(scheme.as_str(), "http" | "https" | "auto") {
        return Err(cz(
            Code::InvalidArgument,
            format!("unsupported scheme {scheme}"),
        ));
    }
    Reference::normalized(&reference)?;
    // SAFETY: isatty on our stderr.
    let tty = unsafe { libc::isatty(2) } == 1;
    let progress = v.opt("progress").unwrap_or_else(|| "auto".into());
    if progress == "plain" || (progress == "auto" && !tty) {
        eprintln!("[1/2] Fetching image [0s]");
    }
    match image::fetch(
        &ctx.settings,
        &ctx.docker,
        &reference,
        platform.as_ref().map(|(o, a)| (o.as_str(), a.as_str())),
    ) {
        Ok(_) => Ok(0),
        Err(e) => {
            let downloads: i64 = v
                .opt("maxConcurrentDownloads")
                .and_then(|d| d.parse().ok())
                .unwrap_or(3);
            if downloads <= 0 {
                return Err(cz(
                    Code::InvalidArgument,
                    format!(
                        "maximum number of concurrent downloads must be greater than 0, got {downloads}"
                    ),
                ));
            }
            Err(e)
        }
    }
}

/// `container image load`.
pub fn image_load(ctx: &Ctx, v: &Values) -> CliResult<i32> {
    let tmp;
    let path = match v.opt("input") {
        Some(i) => {
            let abs = crate::parser::absolute(&i);
            if !Path::new(&abs).exists() {
                ctx.log(&format!("file does not exist: [\"path\": {abs}]"));
                return Err(CliError::Exit(1));
            }
            abs
        }
        None => {
            tmp = ctx
                .settings
                .state_dir
                .join(format!(".load-{}.tar", crate::parser::uuid()));
            std::fs::create_dir_all(&ctx.settings.state_dir)
                .map_err(|e| cz(Code::InternalError, format!("stand-in: {e}")))?;
            let mut f = std::fs::File::create(&tmp)
                .map_err(|_| cz(Code::InternalError, "unable to create temporary file"))?;
            std::io::copy(&mut std::io::stdin(), &mut f)
                .map_err(|e| cz(Code::InternalError, format!("stand-in: {e}")))?;
            tmp.to_string_lossy().into_owned()
        }
    };
    let result = (|| -> CliResult<i32> {
        if !ctx.up() {
            return Err(xpc_down());
        }
        let out = ctx
            .docker
            .output(&["load".into(), "-i".into(), path.clone()])?;
        if !out.status.success() {
            return Err(cz(
                Code::InternalError,
                format!(
                    "stand-in: docker load failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for line in text.lines() {
            if let Some(r) = line.strip_prefix("Loaded image: ") {
                let shown = Reference::normalized(r.trim())
                    .map(|n| n.text())
                    .unwrap_or_else(|_| r.trim().to_string());
                stdout_line(&shown);
            } else if let Some(id) = line.strip_prefix("Loaded image ID: ") {
                stdout_line(id.trim());
            }
        }
        Ok(0)
    })();
    if v.opt("input").is_none() {
        let _ = std::fs::remove_file(&path);
    }
    result
}
