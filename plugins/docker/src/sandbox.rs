//! Sandboxes as containers: create, remove, list, and the image check before creating.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    ListContainersOptions, RemoveContainerOptionsBuilder, StartContainerOptions,
};
use bollard::Docker;
use stet_plugin_api::{
    ImageStatus, Label, Network, PluginError, ROption, SandboxInfo, SandboxOption, SandboxSpec,
};

use crate::{message_of, status_of};

/// What every sandbox runs as its main process: nothing, for ever, under docker's init
/// (which reaps the zombies of exec'd processes). Work arrives through exec.
const IDLE: [&str; 2] = ["sleep", "infinity"];

fn missing_image(image: &str) -> String {
    format!(
        "image {image} is not in the engine's local store; build or load it there \
         (`docker build -t {image} …` or `docker load -i …`); stet never pulls images"
    )
}

pub async fn image_status(docker: &Docker, image: &str) -> Result<ImageStatus, PluginError> {
    match docker.inspect_image(image).await {
        Ok(_) => Ok(ImageStatus {
            present: true,
            remedy: Default::default(),
        }),
        Err(e) if status_of(&e) == Some(404) => Ok(ImageStatus {
            present: false,
            remedy: missing_image(image).into(),
        }),
        Err(e) => Err(PluginError::backend(format!(
            "could not look up image {image}: {}",
            message_of(&e)
        ))),
    }
}

fn check(spec: &SandboxSpec) -> Result<(), PluginError> {
    if spec.image.is_empty() {
        return Err(PluginError::invalid_input("no image given for the sandbox"));
    }
    for mount in spec.mounts.iter() {
        // A relative source would be taken as a named volume, silently.
        if !mount.source.starts_with('/') || !mount.target.starts_with('/') {
            return Err(PluginError::invalid_input(format!(
                "mount {} -> {} is not between absolute paths",
                mount.source, mount.target
            )));
        }
        if !std::path::Path::new(mount.source.as_str()).exists() {
            return Err(PluginError::not_found(format!(
                "mount source {} does not exist on the host",
                mount.source
            )));
        }
    }
    if let Network::AllowHosts(_) = spec.network {
        return Err(PluginError::unsupported(
            "the docker plugin cannot limit egress to named hosts yet",
        )
        .with_remedy("ask for no network or the open network"));
    }
    Ok(())
}

pub async fn create(
    docker: &Docker,
    spec: SandboxSpec,
    open_network: &str,
) -> Result<SandboxInfo, PluginError> {
    let (info, _) = create_with(docker, spec, open_network, Vec::new()).await?;
    Ok(info)
}

/// A sandbox whose first process is the one asked for: attached before it starts, so no
/// output is lost.
pub struct FirstProcess {
    /// The program, as it was asked for (for what its init says when it cannot start it).
    pub program: String,
    pub output: crate::process::Output,
    pub input: Option<std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>>,
    pub stdin: Vec<u8>,
}

/// Where a sandbox with a read-only root may write besides its mounts: `/tmp` and
/// `/var/tmp` (anyone's, programs run from them too) and `/run`, each a tmpfs of at most
/// half the memory limit (1 GiB with none), so that a write past it fails for want of
/// room before the memory limit kills the writer.
pub fn scratch(memory_bytes: u64) -> std::collections::HashMap<String, String> {
    let size = if memory_bytes == 0 {
        1 << 30
    } else {
        memory_bytes / 2
    };
    [("/tmp", "1777"), ("/var/tmp", "1777"), ("/run", "755")]
        .into_iter()
        .map(|(path, mode)| {
            (
                path.to_string(),
                format!("rw,exec,nosuid,nodev,size={size},mode={mode}"),
            )
        })
        .collect()
}

/// Creates and starts a sandbox with `options`: forwarded unix sockets are bind mounts of
/// the socket (read-only: connecting needs no write); a first process replaces the idle
/// one, as `docker run` does.
pub async fn create_with(
    docker: &Docker,
    spec: SandboxSpec,
    open_network: &str,
    options: Vec<SandboxOption>,
) -> Result<(SandboxInfo, Option<FirstProcess>), PluginError> {
    // Each forwarded socket a read-only mount of it; the first process, if asked for.
    let (spec, first) =
        stet_plugin_api::take_options(spec, options, stet_plugin_api::SocketForwarding::AsMount)?;
    check(&spec)?;
    require_image(docker, &spec.image).await?;
    let labels: HashMap<String, String> = spec
        .labels
        .iter()
        .map(|l| (l.key.to_string(), l.value.to_string()))
        .collect();
    let host_config = host_config(&spec, open_network);
    let user = match spec.user {
        ROption::RSome(ids) => Some(format!("{}:{}", ids.uid, ids.gid)),
        ROption::RNone => None,
    };
    let mut env: Vec<String> = spec
        .env
        .iter()
        .map(|v| format!("{}={}", v.name, v.value))
        .collect();
    let mut workdir = (!spec.workdir.is_empty()).then(|| spec.workdir.to_string());
    let (cmd, stdin) = match &first {
        Some(process) => {
            if process.argv.is_empty() {
                return Err(PluginError::invalid_input("no program given to run"));
            }
            env.extend(
                process
                    .env
                    .iter()
                    .map(|v| format!("{}={}", v.name, v.value)),
            );
            if let ROption::RSome(dir) = &process.workdir {
                workdir = Some(dir.to_string());
            }
            (
                process.argv.iter().map(|a| a.to_string()).collect(),
                process.stdin.to_vec(),
            )
        }
        None => (IDLE.iter().map(|s| s.to_string()).collect(), Vec::new()),
    };
    // The image's own ENTRYPOINT (a dev image's often is a shell or a service) would be
    // run with this as its arguments: the program is the entrypoint, the rest its command.
    let mut cmd = Vec::<String>::into_iter(cmd);
    let entrypoint: Vec<String> = cmd.next().into_iter().collect();
    let program = entrypoint.first().cloned().unwrap_or_default();
    let body = ContainerCreateBody {
        image: Some(spec.image.to_string()),
        entrypoint: Some(entrypoint),
        cmd: Some(cmd.collect()),
        env: Some(env),
        working_dir: workdir,
        labels: Some(labels),
        user,
        host_config: Some(host_config),
        open_stdin: Some(first.is_some() && !stdin.is_empty()),
        stdin_once: Some(first.is_some() && !stdin.is_empty()),
        attach_stdout: Some(first.is_some()),
        attach_stderr: Some(first.is_some()),
        attach_stdin: Some(first.is_some() && !stdin.is_empty()),
        ..Default::default()
    };
    let created = docker
        .create_container(
            None::<bollard::query_parameters::CreateContainerOptions>,
            body,
        )
        .await
        .map_err(|e| {
            PluginError::backend(format!(
                "could not create a sandbox from {}: {}",
                spec.image,
                message_of(&e)
            ))
        })?;
    // The first process is attached to before it starts, so none of its output is lost.
    let attached = match &first {
        Some(_) => Some(attach_first(docker, &created.id, !stdin.is_empty()).await?),
        None => None,
    };
    if let Err(e) = docker
        .start_container(&created.id, None::<StartContainerOptions>)
        .await
    {
        let _ = remove(docker, &created.id).await;
        let what = match &first {
            Some(process) => format!("its first process, {}", process.argv[0]),
            None => "`sleep` as its idle process".to_string(),
        };
        return Err(PluginError::backend(format!(
            "could not start the sandbox from {} (with {what}): {}",
            spec.image,
            message_of(&e)
        )));
    }
    let first = attached.map(|a| FirstProcess {
        program,
        output: a.output,
        input: (!stdin.is_empty()).then_some(a.input),
        stdin,
    });
    Ok((
        SandboxInfo {
            id: created.id.into(),
            state: "running".into(),
            labels: spec.labels,
        },
        first,
    ))
}

/// The container's host configuration: the mounts, the network, the limits, and what
/// keeps it in: a read-only root with scratch in memory, no capability, no new privilege,
/// docker's init.
fn host_config(spec: &SandboxSpec, open_network: &str) -> HostConfig {
    let mounts = spec
        .mounts
        .iter()
        .map(|m| Mount {
            typ: Some(MountType::BIND),
            source: Some(m.source.to_string()),
            target: Some(m.target.to_string()),
            read_only: Some(!m.writable),
            ..Default::default()
        })
        .collect();
    let limits = spec.limits;
    let positive = |v: i64| (v > 0).then_some(v);
    let memory = positive(limits.memory_bytes as i64);
    HostConfig {
        // The image's writable layer would be the host's disk, bounded by nothing: the root
        // is read-only, and the places programs write are file systems in memory, each no
        // larger than the memory limit, whose pages the container's memory limit counts.
        readonly_rootfs: Some(true),
        tmpfs: Some(scratch(limits.memory_bytes)),
        mounts: Some(mounts),
        network_mode: Some(
            match spec.network {
                Network::None => "none",
                _ => open_network,
            }
            .to_string(),
        ),
        nano_cpus: positive(limits.millicpus as i64 * 1_000_000),
        memory,
        // No swap beyond the memory limit, so the limit is a limit.
        memory_swap: memory,
        pids_limit: positive(limits.pids as i64),
        cap_drop: Some(vec!["ALL".to_string()]),
        security_opt: Some(vec!["no-new-privileges".to_string()]),
        init: Some(true),
        ..Default::default()
    }
}

/// The image, present in the engine, or why not and how to get it.
async fn require_image(docker: &Docker, image: &str) -> Result<(), PluginError> {
    let status = image_status(docker, image).await?;
    if status.present {
        return Ok(());
    }
    Err(
        PluginError::not_found(format!("image {image} is not available"))
            .with_remedy(status.remedy.as_str()),
    )
}

/// Attaches to a created container's first process before it starts, so that none of its
/// output is lost; on failure the container is removed.
async fn attach_first(
    docker: &Docker,
    id: &str,
    stdin: bool,
) -> Result<bollard::container::AttachContainerResults, PluginError> {
    let options = bollard::query_parameters::AttachContainerOptionsBuilder::default()
        .stream(true)
        .stdout(true)
        .stderr(true)
        .stdin(stdin)
        .build();
    match docker.attach_container(id, Some(options)).await {
        Ok(attached) => Ok(attached),
        Err(e) => {
            let _ = remove(docker, id).await;
            Err(PluginError::backend(format!(
                "could not attach to the sandbox's first process: {}",
                message_of(&e)
            )))
        }
    }
}

pub async fn remove(docker: &Docker, sandbox: &str) -> Result<(), PluginError> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(sandbox, Some(options)).await {
        Ok(()) => Ok(()),
        // Already gone (or being removed by a concurrent teardown): the goal is reached.
        Err(e) if matches!(status_of(&e), Some(404) | Some(409)) => Ok(()),
        Err(e) => Err(PluginError::backend(format!(
            "could not remove sandbox {sandbox}: {}",
            message_of(&e)
        ))),
    }
}

/// Ends every process of a sandbox: its first process is killed, and with it — the
/// kernel ends a pid namespace whose init dies — every other, before the engine reports
/// the container stopped, which is waited for. (The engine's pause would be quicker, but
/// removing a paused container thaws it before its processes die: they would run again,
/// and could write to the lane, while the host uses it.) A sandbox that is gone or not
/// running has nothing left to stop.
pub async fn stop(docker: &Docker, sandbox: &str) -> Result<(), PluginError> {
    use futures_util::StreamExt;
    let kill = bollard::query_parameters::KillContainerOptionsBuilder::default()
        .signal("SIGKILL")
        .build();
    match docker.kill_container(sandbox, Some(kill)).await {
        Ok(()) => {}
        Err(e) if matches!(status_of(&e), Some(404) | Some(409)) => {}
        Err(e) => {
            return Err(PluginError::backend(format!(
                "could not stop sandbox {sandbox}: {}",
                message_of(&e)
            ))
            .with_remedy("tear the sandbox down instead (`stet gc` removes what stet left)"))
        }
    }
    let wait = bollard::query_parameters::WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    match docker.wait_container(sandbox, Some(wait)).next().await {
        // Ended (bollard reports a non-zero exit as an error of its own) or gone.
        None | Some(Ok(_)) => Ok(()),
        Some(Err(bollard::errors::Error::DockerContainerWaitError { .. })) => Ok(()),
        Some(Err(e)) if status_of(&e) == Some(404) => Ok(()),
        Some(Err(e)) => Err(PluginError::backend(format!(
            "sandbox {sandbox} was killed but its end was not seen: {}",
            message_of(&e)
        ))
        .with_remedy("tear the sandbox down instead (`stet gc` removes what stet left)")),
    }
}

/// The full id and the init's pid (as the engine numbers it) of a running sandbox; `None`
/// when it is not running or the engine does not say.
pub async fn init_of(docker: &Docker, sandbox: &str) -> Option<(String, i64)> {
    let container = docker.inspect_container(sandbox, None).await.ok()?;
    let state = container.state?;
    if state.running != Some(true) {
        return None;
    }
    Some((container.id?, state.pid?))
}

pub async fn list(docker: &Docker, labels: &[Label]) -> Result<Vec<SandboxInfo>, PluginError> {
    if labels.is_empty() {
        return Err(PluginError::invalid_input(
            "listing sandboxes needs at least one label, so that only stet's are touched",
        ));
    }
    let filters = HashMap::from([(
        "label".to_string(),
        labels
            .iter()
            .map(|l| format!("{}={}", l.key, l.value))
            .collect(),
    )]);
    let options = ListContainersOptions {
        all: true,
        filters: Some(filters),
        ..Default::default()
    };
    let containers = docker.list_containers(Some(options)).await.map_err(|e| {
        PluginError::backend(format!("could not list sandboxes: {}", message_of(&e)))
    })?;
    Ok(containers
        .into_iter()
        .map(|c| SandboxInfo {
            id: c.id.unwrap_or_default().into(),
            state: c.state.map(|s| s.to_string()).unwrap_or_default().into(),
            labels: c
                .labels
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| Label::new(k, v))
                .collect(),
        })
        .collect())
}
