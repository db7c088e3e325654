//! The runtime's walls, proven live before a drive's first move, whatever the harness: in a
//! real sandbox of the selected runtime, made exactly as an agent's would be (the lane, the
//! session directory, the harness's mounts, network and environment), a short script
//! reports what it can see, and each wall is a check that fails when the runtime leaks:
//!
//! - `lane-only`: the lane is there and writable, and a canary file the host made outside
//!   every mount is not visible;
//! - `env-from-launch`: no variable the launch did not set (beyond what a shell or the
//!   runtime sets by itself), and none whose name looks like a credential;
//! - `network-as-launched`: loopback only — with no network, and with hosts declared (they
//!   are reached through stet's proxy, never through an interface);
//! - `egress-allow-list` (when the launch declares hosts): from inside, through the proxy, a
//!   listener on the host's loopback that is listed is reached, a second one that is not is
//!   refused, and a direct connection to the unlisted one with the proxy variables removed
//!   finds nothing there (the sandbox's loopback is its own);
//! - `own-kernel` (when the runtime's probe offers
//!   [`capability::OWN_KERNEL`](stet_plugin_api::capability::OWN_KERNEL)): the kernel that
//!   answers inside is not the host's — compared as `/proc/version` and as `uname -srv`
//!   ([`own_kernel_wall`]).

use std::collections::BTreeSet;

use stet_plugin_api::{EnvVar, Launch, Network, ProcessSpec};

use crate::credentials::CredentialCheck;
use crate::error::{Concept, Error};
use crate::harness;
use crate::sandbox::{stet_binary, LaneAccess, LaneMounts, OpenRuntime, Plan};
use crate::settings::Settings;

use super::Wall;

/// What a shell or a runtime sets by itself, beside what the launch sets.
const INHERENT: [&str; 8] = [
    "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "PATH", "HOME", "TERM",
];

/// What the host adds to every launch.
const HOST_ADDED: [&str; 3] = ["STET_SESSION_LOG", "STET_IN_SANDBOX", "STET_RECEIPT"];

/// Words in a variable's name that mark a credential.
const CREDENTIAL_WORDS: [&str; 6] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "PASSWD"];

const BEGIN: &str = "stet-runtime-walls 1";
const END: &str = "stet-runtime-walls-end";

/// The wall a runtime offering [`stet_plugin_api::capability::OWN_KERNEL`] is held to,
/// named by the capability's word: it proves what the word claims.
pub const OWN_KERNEL: &str = stet_plugin_api::capability::OWN_KERNEL;

/// A kernel's identity as the sandbox reports it: `/proc/version`, then `uname -srv`
/// (kernel name, release, version: what the `uname` system call answers, which a file
/// mounted over `/proc/version` does not change). Each line is printed even when empty,
/// so that "nothing answered" is told from "the script never got here".
const KERNEL_SCRIPT: &str =
    "printf 'kernel-version %s\\n' \"$(head -n 1 /proc/version 2>/dev/null)\"\n\
     printf 'kernel-uname %s\\n' \"$(uname -srv 2>/dev/null)\"\n";

/// A kernel's identity is shown at most this long in a wall's detail.
const KERNEL_CHARS: usize = 100;

/// Proves the runtime's walls for `launch` (the harness's proof launch, whose mounts,
/// network and environment an agent's launch shares), in a sandbox sealed as the agent's
/// is (`sealed`: the call's credentials).
pub fn prove(
    settings: &Settings,
    runtime: &OpenRuntime,
    launch: &Launch,
    sealed: Option<&mut crate::credentials::Sealed>,
    credential: Option<CredentialCheck>,
) -> Result<Vec<Wall>, Error> {
    let scratch = |prefix: &str| {
        crate::sandbox::leftovers::temp_dir(prefix)
            .map_err(|e| Concept::Walls.failure(format!("cannot make a scratch directory: {e}")))
    };
    let scratch_root = scratch("stet-walls-lane-")?;
    let lane = crate::lanes::scratch(
        &scratch_root
            .path()
            .canonicalize()
            .unwrap_or_else(|_| scratch_root.path().to_path_buf()),
    )
    .map_err(|e| Concept::Walls.failure(format!("cannot make a scratch lane: {e}")))?;
    let lane_path = lane.dir.clone();
    let outside = scratch("stet-walls-canary-")?;
    let canary = outside.path().join("canary");
    std::fs::write(&canary, stet_plugin_api::WALL_CANARY)
        .map_err(|e| Concept::Walls.failure(format!("cannot write the canary: {e}")))?;

    // Two listeners on the host's loopback for the egress wall: one listed, one not.
    let listeners = match &launch.network {
        Network::AllowHosts(_) => Some((
            Listener::start("stet-egress-ok")?,
            Listener::start("stet-egress-leak")?,
        )),
        _ => None,
    };
    let stet = stet_binary()?;
    let egress_script = egress_script(&stet, listeners.as_ref());
    let credential_script = credential
        .as_ref()
        .map(|_| credential_script(&stet, launch, &lane_path))
        .unwrap_or_default();
    // The host's kernel, read before the sandbox is asked for its own; only for a runtime
    // that claims a kernel of its own (every other runtime shares the host's by design).
    let host_kernel = runtime
        .offers(stet_plugin_api::capability::OWN_KERNEL)
        .then(KernelIdentity::of_host);
    let kernel_script = if host_kernel.is_some() {
        KERNEL_SCRIPT
    } else {
        ""
    };
    let script = format!(
        "echo '{BEGIN}'\n\
         env | sed -n 's/^\\([A-Za-z_][A-Za-z0-9_]*\\)=.*/env \\1/p'\n\
         {{ ls -1 /sys/class/net 2>/dev/null | grep . || sed -n 's/^ *\\([^: ]*\\):.*/\\1/p' /proc/net/dev 2>/dev/null; }} | sed 's/^/net /'\n\
         if [ -e '{canary}' ]; then echo 'canary seen'; else echo 'canary unseen'; fi\n\
         if echo written > '{lane}/.stet-walls'; then echo 'lane writable'; fi\n\
         {egress_script}\
         {credential_script}\
         {kernel_script}\
         echo '{END}'\n",
        canary = canary.display(),
        lane = lane_path.display(),
    );
    let probe = Launch {
        process: ProcessSpec {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()].into(),
            env: launch.process.env.clone(),
            workdir: stet_plugin_api::ROption::RNone,
            stdin: Default::default(),
        },
        mounts: launch.mounts.clone(),
        // What the launch declares, and the listed listener of the egress wall.
        network: match (&launch.network, &listeners) {
            (Network::AllowHosts(hosts), Some((listed, _))) => {
                let mut hosts = hosts.to_vec();
                hosts.push(listed.address.to_string().into());
                Network::AllowHosts(hosts.into())
            }
            (other, _) => other.clone(),
        },
    };
    let workdir = lane_path.display().to_string();
    let sealed_names = sealed.as_deref().map(|s| s.variables()).unwrap_or_default();
    let output = harness::run_launch(
        settings,
        runtime,
        &probe,
        Plan::new("walls", &format!("walls-{}", std::process::id()), &workdir)
            .with_lane(LaneMounts::of_lane(&lane), LaneAccess::ReadWrite),
        harness::Watch {
            time_limit: Some(std::time::Duration::from_secs(120)),
            sealed,
            ..harness::Watch::default()
        },
        None,
    )?;
    // Written in the sandbox: read as data, no link followed.
    let seen_on_host = crate::files::read_untrusted(&lane_path.join(".stet-walls"), 64)
        .is_ok_and(|b| b == b"written\n");
    let allowed_env = allowed_env(launch);
    drop(listeners);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut walls = read(
        &stdout,
        &allowed_env,
        &launch.network,
        seen_on_host,
        &sealed_names,
        host_kernel.as_ref(),
    );
    if let Some(check) = credential {
        walls.push(credential_wall(&stdout, &check));
    }
    Ok(walls)
}

/// The variables a sandbox of `launch` may hold: the launch's own, and the proxy's where
/// the host proxies it (its own addition).
fn allowed_env(launch: &Launch) -> Vec<EnvVar> {
    let mut allowed: Vec<EnvVar> = launch.process.env.to_vec();
    if matches!(launch.network, Network::AllowHosts(_)) {
        allowed.extend(
            stet_plugin_api::PROXY_VARIABLES
                .iter()
                .map(|name| EnvVar::new(*name, "")),
        );
    }
    allowed
}

/// The probe's lines for the egress wall: the listed listener and the unlisted one through
/// the proxy, then the unlisted one without it.
fn egress_script(stet: &str, listeners: Option<&(Listener, Listener)>) -> String {
    match listeners {
        Some((listed, unlisted)) => {
            format!(
                "'{stet}' net probe connect {listed} | sed 's/^/egress listed /'\n\
                 '{stet}' net probe connect {unlisted} | sed 's/^/egress unlisted /'\n\
                 env -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY -u http_proxy -u https_proxy -u all_proxy '{stet}' net probe direct {unlisted} | sed 's/^/egress direct /'\n",
                listed = listed.address,
                unlisted = unlisted.address,
            )
        }
        None => String::new(),
    }
}

/// The probe's line for the credential wall: every token in the environment and in every
/// directory mounted (the lane and `/tmp` too), fingerprinted inside and compared outside.
fn credential_script(stet: &str, launch: &Launch, lane: &std::path::Path) -> String {
    let mut dirs: Vec<String> = launch
        .mounts
        .iter()
        .filter(|m| std::path::Path::new(m.source.as_str()).exists())
        .map(|m| format!("'{}'", m.target))
        .collect();
    dirs.push(format!("'{}'", lane.display()));
    dirs.push("/tmp".into());
    format!(
        "'{stet}' net fingerprints {} | sed 's/^/cred /' && echo 'cred done'\n",
        dirs.join(" ")
    )
}

/// `credential-not-in-sandbox`: no token inside has a real credential's fingerprint, and
/// the proof call's requests to the model API had the real one swapped in at the gateway.
fn credential_wall(output: &str, check: &CredentialCheck) -> Wall {
    let lines: Vec<&str> = output.lines().collect();
    let reported = lines.contains(&"cred done");
    let inside: Vec<stet_egress::credentials::Fingerprint> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("cred fp "))
        .filter_map(stet_egress::credentials::Fingerprint::from_hex)
        .collect();
    let found = check.real.iter().filter(|r| inside.contains(r)).count();
    // A proof that sends nothing to its API (a command agent's proof script) shows the
    // sandbox's side only; one that does must have had the credential swapped in.
    let sent = check.gateway.requests > 0;
    let authenticated = !check.swaps_expected || !sent || check.gateway.swapped > 0;
    let held = reported && found == 0 && authenticated;
    let detail = if !reported {
        "the sandbox did not report what it holds".to_string()
    } else if found > 0 {
        format!("{found} real credential(s) found inside the sandbox")
    } else if !authenticated {
        "no request of the proof call reached the model API with the credential swapped in at stet's gateway".to_string()
    } else if !sent {
        format!(
            "none of {} token(s) inside is a real credential (the proof sent no request to the API)",
            inside.len()
        )
    } else {
        format!(
            "none of {} token(s) inside is a real credential; {} request(s) reached the model API with the real one swapped in at stet's gateway",
            inside.len(),
            check.gateway.swapped
        )
    };
    wall(
        "credential-not-in-sandbox",
        held,
        detail,
        "the harness keeps its credential somewhere it did not declare, or the runtime mounts more than asked: do not drive; report this with both plugins' versions",
    )
}

/// A listener on the host's loopback that greets whoever connects, for the egress wall.
struct Listener {
    address: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Listener {
    fn start(greeting: &'static str) -> Result<Listener, Error> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr().map(|a| (l, a)))
            .map_err(|e| Concept::Walls.failure(format!("cannot listen on the loopback: {e}")));
        let (listener, address) = listener?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                if let Ok(mut stream) = stream {
                    use std::io::Write;
                    let _ = writeln!(stream, "{greeting}");
                }
            }
        });
        Ok(Listener { address, stop })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accepting thread, which then sees the stop.
        let _ = std::net::TcpStream::connect(self.address);
    }
}

fn wall(name: &str, held: bool, detail: String, remedy: &str) -> Wall {
    Wall::of_host(name, held, detail, remedy)
}

/// A kernel's identity in the two forms a sandbox can show it; `None` where that form
/// said nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct KernelIdentity {
    /// The first line of `/proc/version` (Linux: release, builder, compiler, build time).
    proc_version: Option<String>,
    /// `uname -srv`: kernel name, release and version, as the system call answers.
    uname: Option<String>,
}

impl KernelIdentity {
    /// The host's own kernel: `/proc/version` where there is one (Linux), and the
    /// `uname` system call everywhere (a macOS host has no `/proc`).
    fn of_host() -> KernelIdentity {
        let proc_version = std::fs::read_to_string("/proc/version").ok();
        let uname = nix::sys::utsname::uname().ok().map(|u| {
            format!(
                "{} {} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy(),
                u.version().to_string_lossy()
            )
        });
        KernelIdentity::of(proc_version.as_deref(), uname.as_deref())
    }

    /// The sandbox's kernel, from the report's `kernel-…` lines.
    fn inside(lines: &[&str]) -> KernelIdentity {
        let said = |prefix: &str| lines.iter().find_map(|l| l.strip_prefix(prefix));
        KernelIdentity::of(said("kernel-version "), said("kernel-uname "))
    }

    fn of(proc_version: Option<&str>, uname: Option<&str>) -> KernelIdentity {
        // Compared whole but for the whitespace around them (the shell and the file end
        // lines differently); empty is no answer.
        let kept = |s: Option<&str>| {
            s.and_then(|s| s.lines().next())
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        KernelIdentity {
            proc_version: kept(proc_version),
            uname: kept(uname),
        }
    }

    /// What the detail shows of it: `uname`'s form where there is one (release and build,
    /// without `/proc/version`'s compiler and linker), shortened.
    fn shown(&self) -> String {
        let said = self.uname.as_deref().or(self.proc_version.as_deref());
        crate::text::one_short_line(said.unwrap_or("nothing"), KERNEL_CHARS)
    }
}

/// `own-kernel`: held only when the sandbox named the kernel answering it, in a form the
/// host can name its own in, and no such form is the host's. Both forms are compared where
/// both sides have them: a runtime that puts a made-up `/proc/version` in front of the
/// host's kernel still answers `uname` with the host's.
fn own_kernel_wall(inside: &KernelIdentity, host: &KernelIdentity) -> Wall {
    let pairs = [
        (&inside.proc_version, &host.proc_version),
        (&inside.uname, &host.uname),
    ];
    let compared: Vec<(&String, &String)> = pairs
        .iter()
        .filter_map(|(i, h)| Some(((*i).as_ref()?, (*h).as_ref()?)))
        .collect();
    let same = compared.iter().any(|(i, h)| i == h);
    let (held, detail, remedy) = if *inside == KernelIdentity::default() {
        (
            false,
            "the sandbox did not say which kernel answers it (no /proc/version, no uname)"
                .to_string(),
            "put uname in the image ([sandbox] image), so that the host can tell which kernel answers inside",
        )
    } else if compared.is_empty() {
        (
            false,
            format!(
                "the kernel inside ({}) cannot be compared with the host's ({}): no form was answered on both sides",
                inside.shown(),
                host.shown()
            ),
            "put uname in the image ([sandbox] image); if it is there, report this with the runtime's version",
        )
    } else if same {
        (
            false,
            format!("the host's own kernel answered inside: {}", inside.shown()),
            "the runtime's probe claims a kernel of its own, but its sandboxes run on the host's: do not count on that isolation; report this with the runtime's version, or choose another runtime",
        )
    } else {
        (
            true,
            format!(
                "a kernel other than the host's answered inside: {} (the host's: {})",
                inside.shown(),
                host.shown()
            ),
            "",
        )
    };
    wall(OWN_KERNEL, held, detail, remedy)
}

/// Reads the script's report into walls; `host_kernel`, when the runtime claims a kernel
/// of its own, is what the kernel inside is compared with.
fn read(
    output: &str,
    launch_env: &[EnvVar],
    network: &Network,
    lane_seen_on_host: bool,
    sealed: &[String],
    host_kernel: Option<&KernelIdentity>,
) -> Vec<Wall> {
    let Some(report) = output
        .split_once(BEGIN)
        .and_then(|(_, rest)| rest.split_once(END))
        .map(|(report, _)| report)
    else {
        return vec![wall(
            "runtime-walls-reported",
            false,
            "the sandbox did not report what it can see".into(),
            "run `stet run -- sh -c 'env; ls /sys/class/net'` to see what the runtime gives",
        )];
    };
    let lines: Vec<&str> = report.lines().map(str::trim).collect();
    let names: BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("env "))
        .collect();
    let nets: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("net "))
        .collect();
    let mut walls = Vec::new();

    let canary_unseen = lines.contains(&"canary unseen");
    let writable = lines.contains(&"lane writable") && lane_seen_on_host;
    walls.push(wall(
        "lane-only",
        canary_unseen && writable,
        match (canary_unseen, writable) {
            (true, true) => "the lane is writable and seen by the host; a file outside every mount is not visible".into(),
            (false, _) => "a file outside every mount is visible inside the sandbox".into(),
            (true, false) => "the lane is not writable inside the sandbox, or the host does not see what was written".into(),
        },
        "the runtime shows the sandbox more than its mounts: use another runtime, or report this with its version",
    ));

    let allowed: BTreeSet<&str> = launch_env
        .iter()
        .map(|v| v.name.as_str())
        .chain(INHERENT)
        .chain(HOST_ADDED)
        .collect();
    let extra: Vec<&str> = names.difference(&allowed).copied().collect();
    let credentials: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| {
            let upper = n.to_ascii_uppercase();
            // A declared credential's variable holds its stand-in, sealed by the host.
            CREDENTIAL_WORDS.iter().any(|w| upper.contains(w)) && !sealed.iter().any(|s| s == n)
        })
        .collect();
    walls.push(wall(
        "env-from-launch",
        extra.is_empty() && credentials.is_empty(),
        if !credentials.is_empty() {
            format!("credential-like variables reached the sandbox: {}", credentials.join(" "))
        } else if !extra.is_empty() {
            format!("variables the launch did not set reached the sandbox: {}", extra.join(" "))
        } else {
            format!("{} variables, each set by the launch or the shell", names.len())
        },
        "the runtime adds variables of its own, or the harness passes a credential: report this with both plugins' versions",
    ));

    // Loopback and nothing else; no interfaces at all means the sandbox could not show them
    // (no /sys, no /proc/net), which proves nothing.
    let only_loopback = nets == ["lo"];
    walls.push(match network {
        Network::Open => wall(
            "network-as-launched",
            true,
            format!("open, as asked: {}", nets.join(", ")),
            "",
        ),
        _ => wall(
            "network-as-launched",
            only_loopback,
            if only_loopback {
                "no interface but loopback".into()
            } else {
                format!(
                    "the sandbox has {} (only loopback was made)",
                    nets.join(", ")
                )
            },
            "the runtime ignores `network none`: use another runtime",
        ),
    });
    if let Network::AllowHosts(_) = network {
        walls.push(egress_wall(&lines));
    }
    if let Some(host) = host_kernel {
        walls.push(own_kernel_wall(&KernelIdentity::inside(&lines), host));
    }
    walls
}

/// `egress-allow-list` from the report's `egress` lines: through stet's proxy a listed host
/// reached, an unlisted one refused, and without the proxy no way to it.
fn egress_wall(lines: &[&str]) -> Wall {
    let egress = |which: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("egress {which} ") as &str))
            .unwrap_or("no answer")
    };
    let (listed, unlisted, direct) = (egress("listed"), egress("unlisted"), egress("direct"));
    let reached = listed.starts_with("reached") && listed.contains("stet-egress-ok");
    let refused = unlisted.starts_with("refused");
    // The unlisted listener on the host's loopback, dialled with the variables removed:
    // inside the sandbox `127.0.0.1` is its own loopback, so nothing answers there. (No
    // probe ever dials an address off the machine; that loopback is all there is is
    // `network-as-launched`'s fact.)
    let no_route = direct.starts_with("no-route") || direct.starts_with("not-there");
    wall(
        "egress-allow-list",
        reached && refused && no_route,
        if reached && refused && no_route {
            "through stet's proxy a listed host is reached and an unlisted one refused; without it the unlisted one is not there".to_string()
        } else {
            format!("listed: {listed}; unlisted: {unlisted}; direct: {direct}")
        },
        "the network wall does not hold: do not drive; report this with the runtime's version",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(body: &str) -> String {
        format!("noise\n{BEGIN}\n{body}\n{END}\n")
    }

    fn env(names: &[&str]) -> Vec<EnvVar> {
        names.iter().map(|n| EnvVar::new(*n, "x")).collect()
    }

    #[test]
    fn a_clean_sandbox_holds_every_wall() {
        let out =
            report("env PATH\nenv STET_ROLE\nenv HOSTNAME\nnet lo\ncanary unseen\nlane writable");
        let walls = read(
            &out,
            &env(&["PATH", "STET_ROLE"]),
            &Network::None,
            true,
            &[],
            None,
        );
        assert!(walls.iter().all(|w| w.held), "{walls:?}");
    }

    #[test]
    fn each_leak_breaks_its_wall() {
        let launch = env(&["STET_ROLE"]);
        let held = |out: &str, net: &Network, seen: bool, name: &str| {
            read(&report(out), &launch, net, seen, &[], None)
                .into_iter()
                .find(|w| w.wall == name)
                .unwrap()
                .held
        };
        let clean = "env STET_ROLE\nnet lo\ncanary unseen\nlane writable";
        assert!(held(clean, &Network::None, true, "lane-only"));
        assert!(!held(
            &clean.replace("canary unseen", "canary seen"),
            &Network::None,
            true,
            "lane-only"
        ));
        assert!(!held(clean, &Network::None, false, "lane-only"));
        assert!(!held(
            &format!("{clean}\nenv SSH_AUTH_SOCK"),
            &Network::None,
            true,
            "env-from-launch"
        ));
        let with_key = env(&["STET_ROLE", "OPENAI_API_KEY"]);
        let walls = read(
            &report(&format!("{clean}\nenv OPENAI_API_KEY")),
            &with_key,
            &Network::None,
            true,
            &[],
            None,
        );
        assert!(
            !walls
                .iter()
                .find(|w| w.wall == "env-from-launch")
                .unwrap()
                .held
        );
        // Unless the host sealed it: then it holds a stand-in.
        let walls = read(
            &report(&format!("{clean}\nenv OPENAI_API_KEY")),
            &with_key,
            &Network::None,
            true,
            &["OPENAI_API_KEY".to_string()],
            None,
        );
        assert!(
            walls
                .iter()
                .find(|w| w.wall == "env-from-launch")
                .unwrap()
                .held
        );
        assert!(!held(
            &format!("{clean}\nnet eth0"),
            &Network::None,
            true,
            "network-as-launched"
        ));
        assert!(held(
            &format!("{clean}\nnet eth0"),
            &Network::Open,
            true,
            "network-as-launched"
        ));
        let none = read("no report", &launch, &Network::None, true, &[], None);
        assert_eq!(none.len(), 1);
        assert!(!none[0].held);
    }

    #[test]
    fn the_egress_wall_holds_only_when_listed_reached_unlisted_refused_and_nothing_routed() {
        let launch = env(&["STET_ROLE"]);
        let hosts = Network::AllowHosts(vec!["127.0.0.1:1".into()].into());
        let egress = |listed: &str, unlisted: &str, direct: &str| {
            let out = report(&format!(
                "env STET_ROLE\nnet lo\ncanary unseen\nlane writable\n\
                 egress listed {listed}\negress unlisted {unlisted}\negress direct {direct}"
            ));
            read(&out, &launch, &hosts, true, &[], None)
                .into_iter()
                .find(|w| w.wall == "egress-allow-list")
                .unwrap()
        };
        let good = (
            "reached 127.0.0.1:1: stet-egress-ok",
            "refused 127.0.0.1:2: stet: blocked 127.0.0.1:2: not listed",
            "not-there 127.0.0.1:2: Connection refused (os error 111)",
        );
        assert!(egress(good.0, good.1, good.2).held);
        let leak = egress(good.0, "reached 127.0.0.1:2: stet-egress-leak", good.2);
        assert!(!leak.held);
        assert!(leak.detail.contains("stet-egress-leak"), "{}", leak.detail);
        assert!(!egress("refused 127.0.0.1:1: x", good.1, good.2).held);
        // A timeout is not "not there": something may have left the sandbox.
        assert!(!egress(good.0, good.1, "unreachable 127.0.0.1:2: timed out").held);
        assert!(!egress(good.0, good.1, "reached 127.0.0.1:2").held);
        assert!(
            egress(
                good.0,
                good.1,
                "no-route 127.0.0.1:2: Network is unreachable"
            )
            .held
        );
        // And with hosts declared, an interface beside loopback breaks the network wall.
        assert!(
            !read(
                &report("env STET_ROLE\nnet lo\nnet eth0\ncanary unseen\nlane writable"),
                &launch,
                &hosts,
                true,
                &[],
                None,
            )
            .into_iter()
            .find(|w| w.wall == "network-as-launched")
            .unwrap()
            .held
        );
    }

    const HOST_PROC: &str =
        "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)";
    const HOST_UNAME: &str =
        "Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)";
    const USER_SPACE_PROC: &str = "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016";
    const USER_SPACE_UNAME: &str = "Linux 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016";

    fn host() -> KernelIdentity {
        KernelIdentity::of(Some(&format!("{HOST_PROC}\n")), Some(HOST_UNAME))
    }

    /// The `own-kernel` wall as `read` makes it from a report with these kernel lines.
    fn own_kernel(kernel_lines: &str, host: &KernelIdentity) -> Wall {
        let out = report(&format!(
            "env STET_ROLE\nnet lo\ncanary unseen\nlane writable\n{kernel_lines}"
        ));
        read(
            &out,
            &env(&["STET_ROLE"]),
            &Network::None,
            true,
            &[],
            Some(host),
        )
        .into_iter()
        .find(|w| w.wall == OWN_KERNEL)
        .expect("an own-kernel wall when the runtime claims its own kernel")
    }

    #[test]
    fn own_kernel_holds_when_another_kernel_answers_inside() {
        let wall = own_kernel(
            &format!("kernel-version {USER_SPACE_PROC}\nkernel-uname {USER_SPACE_UNAME}"),
            &host(),
        );
        assert!(wall.held, "{wall:?}");
        assert_eq!(
            wall.detail,
            format!(
                "a kernel other than the host's answered inside: {USER_SPACE_UNAME} (the host's: {HOST_UNAME})"
            )
        );
        assert!(wall.remedy.is_empty());
        // A macOS host has no /proc/version: uname alone is compared.
        let mac = KernelIdentity::of(None, Some("Darwin 25.0.0 Darwin Kernel Version 25.0.0"));
        assert!(
            own_kernel(
                &format!("kernel-version {USER_SPACE_PROC}\nkernel-uname {USER_SPACE_UNAME}"),
                &mac
            )
            .held
        );
    }

    #[test]
    fn own_kernel_is_not_held_when_the_hosts_kernel_answers_even_behind_a_made_up_proc_version() {
        let same = own_kernel(
            &format!("kernel-version {HOST_PROC}\nkernel-uname {HOST_UNAME}"),
            &host(),
        );
        assert!(!same.held);
        assert_eq!(
            same.detail,
            format!("the host's own kernel answered inside: {HOST_UNAME}")
        );
        assert!(
            same.remedy.contains("do not count on that isolation"),
            "{}",
            same.remedy
        );
        // A file mounted over /proc/version does not change what the uname call answers.
        let disguised = own_kernel(
            &format!("kernel-version {USER_SPACE_PROC}\nkernel-uname {HOST_UNAME}"),
            &host(),
        );
        assert!(!disguised.held, "{disguised:?}");
    }

    #[test]
    fn own_kernel_is_not_held_on_an_empty_or_incomparable_answer() {
        let empty = own_kernel("kernel-version \nkernel-uname   ", &host());
        assert!(!empty.held);
        assert_eq!(
            empty.detail,
            "the sandbox did not say which kernel answers it (no /proc/version, no uname)"
        );
        // Lines the script never printed are no answer either.
        assert!(!own_kernel("", &host()).held);
        // Inside only /proc/version; the host only uname: nothing to compare.
        let mac = KernelIdentity::of(None, Some("Darwin 25.0.0"));
        let incomparable = own_kernel(
            &format!("kernel-version {USER_SPACE_PROC}\nkernel-uname "),
            &mac,
        );
        assert!(!incomparable.held);
        assert!(
            incomparable.detail.contains("cannot be compared"),
            "{}",
            incomparable.detail
        );
    }

    #[test]
    fn a_runtime_that_claims_no_kernel_of_its_own_gets_no_own_kernel_wall() {
        let out = report(&format!(
            "env STET_ROLE\nnet lo\ncanary unseen\nlane writable\nkernel-version {HOST_PROC}"
        ));
        let walls = read(&out, &env(&["STET_ROLE"]), &Network::None, true, &[], None);
        assert!(walls.iter().all(|w| w.wall != OWN_KERNEL), "{walls:?}");
    }

    #[test]
    fn a_kernel_said_at_length_is_shown_on_one_short_line() {
        let long = format!("kernel-version x\nkernel-uname {}\x1b[2J", "y".repeat(400));
        let wall = own_kernel(&long, &host());
        let shown = wall
            .detail
            .strip_prefix("a kernel other than the host's answered inside: ")
            .unwrap();
        assert!(shown.starts_with("yyyy"), "{shown}");
        assert!(shown.contains('…'), "{shown}");
        assert!(
            wall.detail.chars().count() < 2 * KERNEL_CHARS + 80,
            "{}",
            wall.detail
        );
    }

    #[test]
    fn this_hosts_kernel_can_be_named() {
        let here = KernelIdentity::of_host();
        assert!(here.uname.is_some(), "{here:?}");
        if cfg!(target_os = "linux") {
            assert!(
                here.proc_version
                    .as_deref()
                    .is_some_and(|v| v.starts_with("Linux version ")),
                "{here:?}"
            );
        }
    }

    #[test]
    fn the_credential_wall_breaks_on_a_real_fingerprint_inside_or_no_swap() {
        use stet_egress::credentials::Fingerprint;
        let real = Fingerprint::of("sk-ant-oat01-the-real-one-0000000000");
        let other = Fingerprint::of("sk-ant-oat01-a-stand-in-00000000000");
        let check = |swapped| CredentialCheck {
            real: vec![real],
            swaps_expected: true,
            gateway: stet_egress::server::GatewayCounts {
                requests: 2,
                swapped,
            },
        };
        let out = |fps: &[Fingerprint], done: bool| {
            let mut text: String = fps
                .iter()
                .map(|f| format!("cred fp {}\n", f.hex()))
                .collect();
            if done {
                text.push_str("cred done\n");
            }
            text
        };
        assert!(credential_wall(&out(&[other], true), &check(2)).held);
        let leak = credential_wall(&out(&[other, real], true), &check(2));
        assert!(!leak.held);
        assert_eq!(leak.detail, "1 real credential(s) found inside the sandbox");
        assert!(!credential_wall(&out(&[other], true), &check(0)).held);
        assert!(!credential_wall(&out(&[other], false), &check(2)).held);
    }
}
