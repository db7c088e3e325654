//! One walled agent call, the same wherever it is made: a drive's stage, `stet ask`, the
//! start-up proof.
//!
//! A call runs on a fresh copy of the walled profile whose credentials are stand-ins
//! ([`CallProfile`]); the harness describes the launch for that copy; the launch runs in
//! a fresh sandbox walled in as the [`Plan`] says (the lane's mounts, the network the
//! harness declared, through stet's proxy and its credential gateway); the copy is then
//! settled back (the harness carries back what its own rule keeps, a refreshed login) and
//! deleted. What differs between callers — a sandbox made ahead, a receipt before the call,
//! a commit after it — is theirs; the steps are here, once.
//!
//! Invariant: no agent call of the host runs a launch except through [`Walled::run`] (a
//! sandbox made ahead is made by [`harness::ready_launch`] with the copy's stand-ins and
//! run by [`Walled::run_ready`]).

use std::path::Path;
use std::time::Duration;

use stet_plugin_api::{Launch, Profile, Role, RoleRequest};

use crate::error::Error;
use crate::harness::{self, CallProfile, LaunchOutput, OpenHarness, Ready, Watch};
use crate::receipts::{CallContext, PluginRecord};
use crate::sandbox::{OpenRuntime, Plan};
use crate::settings::Settings;

/// What every walled call is made with: the settings, the runtime and harness selected,
/// and the walled profile the calls copy.
#[derive(Clone, Copy)]
pub struct Walled<'a> {
    /// The resolved settings (image, limits, network).
    pub settings: &'a Settings,
    /// Where the call runs.
    pub runtime: &'a OpenRuntime,
    /// Which agent runs.
    pub harness: &'a OpenHarness,
    /// The walled profile each call copies.
    pub profile: &'a Profile,
}

/// What a call is asked: its role, its prompt, and the directory it works in.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    /// The role (implement, review, proof).
    pub role: Role,
    /// The prompt.
    pub prompt: &'a str,
    /// The working directory, as the sandbox sees it (the lane's path).
    pub workdir: &'a str,
}

/// A call's launch on its own copy of the profile, not run yet.
pub struct Launched {
    /// The copy (its stand-ins are revoked when it is dropped, after the sandbox).
    pub profile: CallProfile,
    /// What the harness asked to run, for that copy.
    pub launch: Launch,
}

/// The word a receipt, a sandbox's name and the display use for `role`.
pub fn role_word(role: Role) -> &'static str {
    match role {
        Role::Implement => "implement",
        Role::Review => "review",
        Role::Proof => "proof",
    }
}

impl Walled<'_> {
    /// Renews the stored login first when it would expire within `within` (the call's
    /// time limit); `note` is told what happens. Returns the new expiry when it renewed.
    pub fn keep_fresh(&self, within: Duration, note: &dyn Fn(&str)) -> Result<Option<u64>, Error> {
        crate::refresh::keep_fresh(
            self.settings,
            self.runtime,
            self.harness,
            self.profile,
            within,
            note,
        )
    }

    /// A fresh copy of the walled profile for one call, its credentials sealed away.
    pub fn copy_profile(&self) -> Result<CallProfile, Error> {
        CallProfile::of(self.harness, self.profile)
    }

    /// The harness's launch of `request` on `copy`.
    pub fn launch_on(&self, copy: &CallProfile, request: Request<'_>) -> Result<Launch, Error> {
        self.harness.launch(RoleRequest {
            role: request.role,
            prompt: request.prompt.into(),
            profile_dir: copy.dir.clone().into(),
            workdir: request.workdir.into(),
        })
    }

    /// A fresh copy of the profile and the harness's launch of `request` on it.
    pub fn launch(&self, request: Request<'_>) -> Result<Launched, Error> {
        let profile = self.copy_profile()?;
        let launch = self.launch_on(&profile, request)?;
        Ok(Launched { profile, launch })
    }

    /// Runs `launched` in a fresh sandbox made as `plan` says, walled in with the copy's
    /// stand-ins; standard output goes to `log` as it comes.
    pub fn run(
        &self,
        launched: &mut Launched,
        plan: Plan,
        watch: Watch<'_>,
        log: Option<&Path>,
    ) -> Result<LaunchOutput, Error> {
        let watch = Watch {
            sealed: Some(&mut launched.profile.sealed),
            ..watch
        };
        harness::run_launch(
            self.settings,
            self.runtime,
            &launched.launch,
            plan,
            watch,
            log,
        )
    }

    /// Runs `launched` in `ready`, the sandbox made ahead for it (it [`Ready::fits`] the
    /// launch, and was made with the copy's stand-ins).
    pub fn run_ready(
        &self,
        ready: Ready<'_>,
        launched: &mut Launched,
        watch: Watch<'_>,
        log: Option<&Path>,
    ) -> Result<LaunchOutput, Error> {
        let watch = Watch {
            sealed: Some(&mut launched.profile.sealed),
            ..watch
        };
        harness::run_ready(ready, self.settings, &launched.launch, watch, log)
    }

    /// After the call: the harness carries back what it keeps from the copy (a login its
    /// agent refreshed), and the copy is deleted. Returns the files carried back.
    pub fn settle(&self, copy: CallProfile) -> Result<Vec<String>, Error> {
        copy.settle(self.harness, self.profile)
    }
}

/// Where and when a call is made, for its receipt.
pub struct Made<'a> {
    /// The receipt's id.
    pub id: String,
    /// The run (`drive-…`, `ask-…`).
    pub run: String,
    /// The item and the lane's branch (empty outside a drive).
    pub item: String,
    /// The lane's branch.
    pub lane: String,
    /// Who made the call.
    pub role: crate::receipts::CallRole,
    /// The lane's round (a drive's calls).
    pub round: Option<u32>,
    /// The network route the call has.
    pub network: String,
    /// When it started, ms since the epoch.
    pub started_unix_ms: u64,
    /// The lane's commit before the call.
    pub commit_before: String,
    /// Where its full output goes.
    pub log: std::path::PathBuf,
    /// What the agent is asked (none for the repository's check): kept with the receipt.
    pub prompt: Option<String>,
    /// The runtime as the receipt names it (hashed where it was opened).
    pub runtime: &'a PluginRecord,
    /// The harness as the receipt names it (the repository's check has none).
    pub harness: &'a PluginRecord,
}

impl<'a> Walled<'a> {
    /// The receipt's context of a call `made` in this walled set-up.
    pub fn context<'r>(&self, made: Made<'r>) -> CallContext<'r>
    where
        'a: 'r,
    {
        CallContext {
            id: made.id,
            run: made.run,
            item: made.item,
            lane: made.lane,
            role: made.role,
            round: made.round,
            runtime: made.runtime,
            runtime_reason: &self.runtime.selection.reason,
            harness: made.harness,
            image: &self.settings.image,
            network: made.network,
            limits: self.settings.limits.describe(),
            started_unix_ms: made.started_unix_ms,
            ended_unix_ms: made.started_unix_ms,
            commit_before: made.commit_before,
            commit_after: String::new(),
            log: made.log,
            prompt: made.prompt,
        }
    }
}

pub use crate::timestamp::now_ms;
