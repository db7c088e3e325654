//! `stet profile login`: the agent's own login, run on your terminal inside a sandbox with
//! the walled profile mounted, so the login lands in the profile, written by the agent
//! itself. stet forwards keystrokes and output and never reads what is written.

use super::error::{CliError, Exit};
use crate::harness;
use crate::printer::Printer;
use crate::sandbox::{terminal, Plan};
use crate::settings::Settings;

use super::ProfileLoginArgs;

pub fn login(
    settings: &Settings,
    _args: &ProfileLoginArgs,
    printer: Printer,
) -> Result<Exit, CliError> {
    if !terminal::on_terminal() {
        return Err(CliError::usage("stet profile login needs a terminal")
            .hint("run it in your own shell, not from a script or a pipe"));
    }
    let (harness, runtime) = harness::open_with_runtime(settings)?;
    // The one profile; with none yet, the one this login creates.
    let profile_dir = match harness.profile_if_any()? {
        Some(profile) => std::path::PathBuf::from(profile.dir.as_str()),
        None => {
            let dir = settings.profiles_root.join(&harness.name);
            std::fs::create_dir_all(&dir)
                .map_err(|e| CliError::failure(format!("cannot create {}: {e}", dir.display())))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
            printer.warn(&format!("created the walled profile {}", dir.display()));
            dir
        }
    };
    let profile_text = profile_dir.display().to_string();
    let launch = harness.login_launch(&profile_text)?;
    let mut plan = Plan::new("login", &format!("login-{}", std::process::id()), "/tmp");
    plan.mounts = launch.mounts.to_vec();
    plan.env = Vec::new();
    // The login talks to the agent's vendor, and only to the hosts its harness declared,
    // through stet's proxy.
    let walled = crate::network::WalledSandbox::make(
        settings,
        &runtime,
        &launch.network,
        Vec::new(),
        &[],
        plan,
    )?;
    let mut process = launch.process.clone();
    process.env.extend(walled.env());
    let status =
        terminal::attach(&walled.sandbox.spawn_terminal(process, terminal::size())?)?.status?;
    walled.finish(None);
    let logged_in = harness.profile().map(|p| p.logged_in).unwrap_or(false);
    printer.out("");
    if logged_in {
        printer.out(&format!(
            "{}: the walled profile {} has a login",
            harness.name, profile_text
        ));
        Ok(Exit::Success)
    } else {
        printer.out(&format!(
            "{}: no login was recorded in {} (the login ended with {:?})",
            harness.name, profile_text, status
        ));
        Ok(Exit::Unusable)
    }
}
