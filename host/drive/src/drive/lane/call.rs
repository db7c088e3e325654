//! The agent's call of a stage, through the one walled call (`crate::call`): its copy of
//! the profile and sandbox made ahead or now, its receipt before and after, the work it
//! left committed.

use stet_plugin_api::{CallOutcome, EnvVar, OutcomeCode, ROption, Role};

use crate::call::{self, Launched, Request, Walled};
use crate::error::{Concept, Error, Kind};
use crate::harness::{self, LaunchOutput, Ready};
use crate::lanes::{self, Lane};
use crate::queue;
use crate::receipts::{self, CallContext};
use crate::sandbox::{LaneAccess, LaneMounts, Plan};

use super::super::ahead::PreparedCall;
use super::super::state::ItemEnd;
use super::super::worker::{first_line, Worker};

/// How one agent call ended, as the drive needs it.
pub(in crate::drive) struct Call {
    pub kind: OutcomeCode,
    pub detail: String,
    pub retry_at: Option<i64>,
    /// The call's receipt.
    pub receipt: String,
    /// Why the call never ran its task, when it did not: the harness could not describe
    /// its launch, or the sandbox could not start or run it.
    pub not_run: Option<Error>,
    /// What the call left in the lane cannot be taken, and why.
    pub refused: Option<Refused>,
}

/// Why what a call left in the lane was not taken.
pub(in crate::drive) enum Refused {
    /// The gate would not let it cross (a repository, a path or file git cannot hold, too
    /// much to read): the item's round, its words handed to the next one.
    Round(String),
    /// The lane could not be committed or put back: the item fails, saying why.
    Fail(String),
}

impl Call {
    /// Whether the call failed for a reason outside the agent: what enters the outage
    /// rule instead of counting toward the item's rounds.
    pub fn outage(&self) -> bool {
        self.not_run.as_ref().is_some_and(counts_toward_outage)
            || self.kind == OutcomeCode::SERVICE_UNAVAILABLE
    }

    /// Why stet refused to make this call, when a refusal by policy kept it from
    /// running: its item's, which fails saying why, since the next round would carry the
    /// same.
    pub fn refused_by_policy(&self) -> Option<String> {
        self.not_run
            .as_ref()
            .filter(|e| !counts_toward_outage(e))
            .map(|e| match &e.hint {
                Some(hint) => format!("{}; {hint}", e.message),
                None => e.message.clone(),
            })
    }

    /// How the lane's work ends for now when the call ended for a reason outside its
    /// item — a usage limit, a login the model API refused, a call that could not be made
    /// (`stage` names it) —, read from the harness's typed outcome. `None`: the agent
    /// answered, in whatever shape, and that is its item's round.
    pub fn outside_the_item(&self, stage: &str) -> Option<ItemEnd> {
        match self.kind {
            OutcomeCode::RATE_LIMITED => Some(ItemEnd::RateLimited(self.retry_at)),
            OutcomeCode::NOT_LOGGED_IN => {
                Some(ItemEnd::LoginRefused(first_line(&self.detail).to_string()))
            }
            _ if self.outage() => Some(ItemEnd::RunnerFailed(format!("{stage}: {}", self.detail))),
            _ => None,
        }
    }

    /// A call the harness could not launch: infrastructure; nothing ran, no receipt.
    fn not_launched(why: Error) -> Call {
        Call {
            kind: OutcomeCode::FAILED,
            detail: why.to_string().replace('\n', "; "),
            retry_at: None,
            receipt: String::new(),
            not_run: Some(why),
            refused: None,
        }
    }
}

/// How many usage limits in a row without a readable reset time an item's call may meet
/// before the limit counts as the item's round.
pub(in crate::drive) const UNREADABLE_LIMITS: u32 = 3;

/// Whether an error that kept a call (or a check) from running its task counts toward
/// the drive's outage rule rather than its item: a match on whose it is to mend. The
/// runtime or the engine failing (`Failure`), something not usable now (`Unusable`) and
/// an error in the set-up a plugin reports (`Usage`: an image or a container not found,
/// a registry's answer, a socket not listening yet — errors time mends as often as not)
/// count toward an outage; a refusal by the walls of what this call would carry
/// (`Refused`: a credential in the item's prompt) is its item's, and fails it.
pub(in crate::drive) fn counts_toward_outage(error: &Error) -> bool {
    match error.kind {
        Kind::Failure | Kind::Unusable | Kind::Usage => true,
        Kind::Refused => false,
    }
}

/// What a call that could not run is recorded as: failed, with why, and the network it
/// was given.
fn not_run(e: &Error, network: String) -> (LaunchOutput, CallOutcome) {
    (
        LaunchOutput::none(network),
        CallOutcome {
            kind: OutcomeCode::FAILED,
            detail: e.to_string().lines().collect::<Vec<_>>().join("; ").into(),
            retry_at_unix: ROption::RNone,
            cost_usd: ROption::RNone,
            usage: Default::default(),
        },
    )
}

/// The outcome of a call whose output the harness could not read: out of shape, saying
/// why.
fn unreadable(e: &Error) -> CallOutcome {
    CallOutcome {
        kind: OutcomeCode::OUT_OF_SHAPE,
        detail: format!("the harness could not read the agent's output: {e}")
            .lines()
            .collect::<Vec<_>>()
            .join("; ")
            .into(),
        retry_at_unix: ROption::RNone,
        cost_usd: ROption::RNone,
        usage: Default::default(),
    }
}

impl Worker<'_, '_> {
    /// The drive's walled set-up, which every call of its lanes is made in.
    pub(in crate::drive) fn walled(&self) -> Walled<'_> {
        Walled {
            settings: self.drive.settings,
            runtime: &self.drive.runtime,
            harness: &self.drive.harness,
            profile: &self.drive.profile,
        }
    }

    /// How a call of `role` sees the lane: review judges it, and the mount, not the guard,
    /// keeps it from changing it.
    pub(in crate::drive) fn call_plan(&self, role: Role, lane: &Lane) -> Plan {
        let access = match role {
            Role::Review => LaneAccess::ReadOnly,
            _ => LaneAccess::ReadWrite,
        };
        Plan::new(
            call::role_word(role),
            &self.drive.run,
            &lane.dir.display().to_string(),
        )
        .with_lane(LaneMounts::of_lane(lane), access)
    }

    /// Renews the login first if it would expire before a call could end.
    fn keep_fresh(&self) -> Result<Option<u64>, Error> {
        let walled = self.walled();
        crate::refresh::keep_fresh_at(
            &|| self.drive.clock.now_ms(),
            walled.settings,
            walled.runtime,
            walled.harness,
            walled.profile,
            std::time::Duration::from_secs(self.drive.options.call_limit_secs),
            &|text| self.drive.progress.note(text),
        )
    }

    /// A call of `role` made ready: its profile copy (the login renewed first if due) and
    /// its sandbox, from the launch the harness gives for that copy and `prompt`.
    pub(in crate::drive) fn prepare_call(
        &self,
        lane: &Lane,
        role: Role,
        prompt: &str,
    ) -> Result<PreparedCall<'_>, Error> {
        let (mut profile, login_expiry, settled) = {
            let settled = self.drive.lock_profile();
            self.keep_fresh()?;
            (
                self.walled().copy_profile()?,
                self.drive.harness.login_expiry(&self.drive.profile)?,
                *settled,
            )
        };
        let workdir = lane.dir.display().to_string();
        let request = Request {
            role,
            prompt,
            workdir: &workdir,
        };
        let launch = self
            .walled()
            .launch_on(&profile, request)
            .map_err(|e| Concept::Drive.failure(e.to_string()))?;
        let ready = harness::ready_launch(
            self.drive.settings,
            &self.drive.runtime,
            &launch,
            self.call_plan(role, lane),
            Some(&mut profile.sealed),
            false,
        )?;
        Ok(PreparedCall {
            profile,
            ready,
            login_expiry,
            settled,
        })
    }

    /// One agent call, with its receipt recorded before it starts and when it ends. With
    /// `commit`, what the agent left in the working copy is committed with that message
    /// before the receipt, so the receipt's commit-after holds the call's work.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::drive) fn agent_call<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        round: u32,
        role: Role,
        prompt: &str,
        commit: Option<&str>,
        prepared: Option<PreparedCall<'env>>,
    ) -> Result<Call, Error> {
        self.settings_unchanged()?;
        let workdir = lane.dir.display().to_string();
        let request = Request {
            role,
            prompt,
            workdir: &workdir,
        };
        let (mut launched, ready) = match self.launch_for(request, prepared)? {
            Ok(launched) => launched,
            Err(e) => return Ok(Call::not_launched(e)),
        };
        // A prompt refused by policy is refused before its receipt keeps it on disk (a
        // credential learned only from the launch's variables is found later, at launch).
        if let Err(e) = launched.profile.sealed.check_prompt(prompt.as_bytes()) {
            if let Some(ready) = ready {
                ready.discard(Some(self.reaper));
            }
            return Ok(Call::not_launched(e));
        }
        let mut receipt = self.start_receipt(item, lane, round, role, prompt, &launched)?;
        let ran = self.run_call(&mut launched, ready, lane, role, &receipt);
        // The runtime or the harness failing (a sandbox that cannot start, an output the
        // harness cannot read) is this call failing: recorded, and counted toward an
        // outage by the caller, not the end of the drive.
        let (output, outcome, not_run) = match ran {
            Ok((output, outcome)) => (output, outcome, None),
            Err(e) => {
                let (output, outcome) = not_run(&e, receipt.network.clone());
                (output, outcome, Some(e))
            }
        };
        receipt.network = output.network.clone();
        receipt.ended_unix_ms = self.drive.clock.now_ms();
        let carried = {
            let mut settled = self.drive.lock_profile();
            let carried = self.walled().settle(launched.profile);
            if !matches!(&carried, Ok(files) if files.is_empty()) {
                *settled += 1;
            }
            carried
        };
        let refused = match commit {
            Some(message) => self.commit_work(item, lane, message, &receipt.id)?,
            None => None,
        };
        receipt.commit_after = lane.head().unwrap_or_default();
        let mut end = harness::call_end(&output, &outcome);
        if not_run.is_some() {
            end.outcome = receipts::Outcome::NotRun;
        }
        match carried {
            Ok(files) => end.profile_carried = files,
            Err(e) => self
                .drive
                .progress
                .warn(&format!("{}: {e}", item.id).replace('\n', "; ")),
        }
        let id = receipt.id.clone();
        // The agent's report: a cost that is no amount is not added.
        if let Some(cost) = end.cost_usd.filter(|c| c.is_finite() && *c >= 0.0) {
            self.drive.tally().cost_usd += cost;
        }
        receipts::record_end(&self.drive.repo, receipt, end)
            .map_err(|e| Concept::Drive.failure(format!("cannot record the receipt: {e}")))?;
        let (kind, detail) = self.limit_read(
            &item.id,
            outcome.kind,
            outcome.detail.to_string(),
            outcome.retry_at_unix.into_option(),
        );
        Ok(Call {
            kind,
            detail,
            retry_at: outcome
                .retry_at_unix
                .into_option()
                .filter(|at| self.readable_reset(*at)),
            receipt: id,
            not_run,
            refused,
        })
    }

    /// Whether a usage limit's reset time `at` can be read as one: later than now, and a
    /// date (a time before now — `-5`, or `2^64-1` read as -1 — or past the year 9999 is
    /// no reset time).
    fn readable_reset(&self, at: i64) -> bool {
        const YEAR_9999_END: i64 = 253_402_300_799;
        at > self.drive.clock.now() && at <= YEAR_9999_END
    }

    /// A usage limit whose reset time cannot be read is waited at the drive's floor, then
    /// the call is made again; after [`UNREADABLE_LIMITS`] of them in a row for one item,
    /// the limit is the item's round (its words kept), never a wait for ever.
    fn limit_read(
        &self,
        item: &str,
        kind: OutcomeCode,
        detail: String,
        retry_at: Option<i64>,
    ) -> (OutcomeCode, String) {
        let mut tally = self.drive.tally();
        if kind != OutcomeCode::RATE_LIMITED || retry_at.is_some_and(|at| self.readable_reset(at)) {
            tally.unreadable_limits.remove(item);
            return (kind, detail);
        }
        let count = tally.unreadable_limits.entry(item.to_string()).or_insert(0);
        *count += 1;
        if *count < UNREADABLE_LIMITS {
            return (kind, detail);
        }
        tally.unreadable_limits.remove(item);
        (
            OutcomeCode::FAILED,
            format!(
                "the agent said it hit a usage limit {UNREADABLE_LIMITS} times in a row without a reset time stet could read ({}): {detail}",
                retry_at.map_or_else(|| "none given".to_string(), |at| format!("it said {at}"))
            ),
        )
    }

    /// The walled settings must still be exactly what the drive wrote at its start.
    fn settings_unchanged(&self) -> Result<(), Error> {
        let changed = self
            .drive
            .harness
            .check_walls(&self.drive.profile)?
            .into_iter()
            .find(|w| w.wall.as_str() == stet_plugin_api::wall::SETTINGS_EXACT && !w.held());
        match changed {
            None => Ok(()),
            Some(w) => Err(Concept::Drive.unusable("the walled settings changed during the drive; it stops",
            )
            .caused_by(w.detail.to_string())
            .hint(
                "do not edit the profile's settings while a drive runs; start the drive again to rewrite them",
            )),
        }
    }

    /// The call's launch on its own copy of the profile, with the sandbox made ahead for
    /// it when that is still good: made from the profile as it is now (the login stored
    /// now, everything earlier calls carried back) and fitting the launch made now (which
    /// asks for exactly the sandbox's mounts, network and environment). The inner error
    /// is the harness failing to launch: no call was made.
    #[allow(clippy::type_complexity)]
    fn launch_for<'env>(
        &'env self,
        request: Request<'_>,
        prepared: Option<PreparedCall<'env>>,
    ) -> Result<Result<(Launched, Option<Ready<'env>>), Error>, Error> {
        let walled = self.walled();
        let (prepared, fresh, renewed) = {
            let settled = self.drive.lock_profile();
            // A login that would expire before this call could end is renewed first.
            let renewed = self.keep_fresh();
            let current = |p: &PreparedCall| {
                matches!(renewed, Ok(None))
                    && p.settled == *settled
                    && self.drive.harness.login_expiry(&self.drive.profile).ok()
                        == Some(p.login_expiry)
            };
            let fresh = prepared.as_ref().is_some_and(current);
            (prepared, fresh, renewed)
        };
        // Retired outside the profile's lock: stale, or not fitting the launch made now.
        let prepared = match prepared {
            Some(p) if fresh => match walled.launch_on(&p.profile, request) {
                Ok(launch) if p.ready.fits(&launch) => Some((p, launch)),
                _ => {
                    p.discard(Some(self.reaper));
                    None
                }
            },
            Some(p) => {
                p.discard(Some(self.reaper));
                None
            }
            None => None,
        };
        renewed?;
        Ok(match prepared {
            Some((p, launch)) => Ok((
                Launched {
                    profile: p.profile,
                    launch,
                },
                Some(p.ready),
            )),
            None => {
                // A fresh copy of the profile for this call alone.
                let profile = {
                    let _settled = self.drive.lock_profile();
                    walled.copy_profile()?
                };
                walled
                    .launch_on(&profile, request)
                    .map(|launch| (Launched { profile, launch }, None))
            }
        })
    }

    /// The call's receipt, recorded as running before the agent is launched.
    fn start_receipt(
        &self,
        item: &queue::Item,
        lane: &Lane,
        round: u32,
        role: Role,
        prompt: &str,
        launched: &Launched,
    ) -> Result<CallContext<'_>, Error> {
        let started = self.drive.clock.now_ms();
        let id = format!("{started}-{}-{}", item.id, call::role_word(role));
        let receipt = self.walled().context(call::Made {
            log: receipts::log_path(&self.drive.repo, &id),
            prompt: Some(prompt.to_string()),
            id,
            run: self.drive.run.clone(),
            item: item.id.clone(),
            lane: lane.branch.clone(),
            role: receipts::CallRole::of(role),
            round: Some(round),
            network: crate::network::describe(
                &launched.launch.network,
                &self.drive.settings.network,
            ),
            started_unix_ms: started,
            commit_before: lane.head().unwrap_or_default(),
            runtime: &self.drive.runtime_record,
            harness: &self.drive.harness_record,
        });
        receipts::record_start(&self.drive.repo, &receipt)
            .map_err(|e| Concept::Drive.failure(format!("cannot record the receipt: {e}")))?;
        self.drive.progress.call(self.slot, &receipt.id, round);
        Ok(receipt)
    }

    /// Runs the call in the sandbox made ahead, or a fresh one, watched: published for a
    /// second signal, killed at the call limit, followed with `--follow`; its outcome read
    /// by the harness.
    fn run_call(
        &self,
        launched: &mut Launched,
        ready: Option<Ready<'_>>,
        lane: &Lane,
        role: Role,
        receipt: &CallContext<'_>,
    ) -> Result<(LaunchOutput, CallOutcome), Error> {
        let progress = &self.drive.progress;
        let follow = |_: stet_plugin_api::Stream, bytes: &[u8]| progress.follow(bytes);
        let watch = harness::Watch {
            in_flight: Some(self.in_flight),
            time_limit: Some(std::time::Duration::from_secs(
                self.drive.options.call_limit_secs,
            )),
            follow: self.drive.options.follow.then_some(&follow as _),
            env: vec![EnvVar::new("STET_RECEIPT", receipt.id.clone())],
            sealed: None,
            stub_model_api: false,
            reaper: Some(self.reaper),
        };
        let walled = self.walled();
        let log = Some(receipt.log.as_path());
        let output = match ready {
            Some(ready) => walled.run_ready(ready, launched, watch, log),
            None => walled.run(launched, self.call_plan(role, lane), watch, log),
        }?;
        // Output the harness cannot read is the agent's answer out of shape — its item's
        // round, with why —, not a call that could not be made.
        let outcome = harness::outcome_of(&self.drive.harness, role, &output)
            .unwrap_or_else(|e| unreadable(&e));
        Ok((output, outcome))
    }

    /// Commits what the call left in the lane, with git trailers naming the agent and the
    /// receipt, then puts the lane back to that commit: the next call sees only what was
    /// committed. `Some` is why what it left was not taken.
    fn commit_work(
        &self,
        item: &queue::Item,
        lane: &Lane,
        message: &str,
        receipt: &str,
    ) -> Result<Option<Refused>, Error> {
        let _lock = self.lock()?;
        let harness = &self.drive.harness;
        let message = format!(
            "{message}\n\nStet-Agent: {} {}\nStet-Receipt: {receipt}",
            harness.name, harness.version
        );
        let mut refused = None;
        let committed = lane.commit_all_as(
            &message,
            self.drive.author.as_ref(),
            self.drive.settings.max_file,
            self.drive.settings.limits.disk_bytes,
        );
        match committed {
            Ok(committed) if !committed.removed.is_empty() => {
                let listed: Vec<String> =
                    committed.removed.iter().map(ToString::to_string).collect();
                self.drive.progress.warn(&format!(
                    "{}: taken out of the lane before it was committed: {}",
                    item.id,
                    listed.join(", ")
                ));
            }
            Ok(_) => {}
            Err(lanes::CommitError::Refused(why)) => refused = Some(Refused::Round(why)),
            Err(lanes::CommitError::Gate(e)) => {
                refused = Some(Refused::Fail(format!(
                    "stet could not look at what the agent left, so it took none of it: {e}"
                )))
            }
            Err(e) => self
                .drive
                .progress
                .warn(&format!("{}: cannot commit the agent's work: {e}", item.id)),
        }
        // What this call left beside the commit — ignored files too — is gone.
        if let Err(e) = lane.restore() {
            refused.get_or_insert(Refused::Fail(format!(
                "the lane could not be put back to its last commit after the call: {e}"
            )));
        }
        Ok(refused)
    }
}
