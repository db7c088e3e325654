//! One lane's stages: implement → check → review → land, each a move under the drain lock,
//! each agent call recorded before it starts and again before the next move.

use std::sync::atomic::Ordering;

use stet_plugin_api::{EnvVar, OutcomeCode, ROption, Role, RoleRequest};

use crate::error::{CliError, Exit};
use crate::harness;
use crate::lanes::{self, Lane};
use crate::queue;
use crate::receipts;
use crate::reservations::Reservation;
use crate::sandbox::{self, LaneAccess, LaneMounts, Plan, Sandbox};

use super::drain::ItemEnd;
use super::{note, now_ms, Drive};

/// How one agent call ended, as the drive needs it.
struct Call {
    kind: OutcomeCode,
    detail: String,
    retry_at: Option<i64>,
}

impl Drive<'_> {
    pub(super) fn reservation(&self, item: &str, stage: &str) -> Reservation {
        Reservation {
            item: item.to_string(),
            holder: self.holder.clone(),
            lane: lanes::branch_of(item),
            stage: stage.to_string(),
            expires_at_unix: (now_ms() / 1000) as i64 + self.options.lease_secs,
        }
    }

    /// The drain lock, held for one move.
    pub(super) fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, CliError> {
        let path = receipts::git_dir(&self.repo).join("stet/drain.lock");
        crate::files::lock_exclusive(&path).map_err(|e| {
            CliError::failure(format!(
                "cannot take the drain lock {}: {e}",
                path.display()
            ))
        })
    }

    /// A new stage of `lane`: a move. The reservation says the stage (renewed with it);
    /// a reservation another drive took over ends the lane's work here.
    fn enter(&self, lane: &Lane, stage: &str) -> Result<(), String> {
        self.moves.set(self.moves.get() + 1);
        self.progress.stage(self.moves.get(), &lane.branch, stage);
        self.keeper.set_stage(stage)?;
        if let Some(why) = self.keeper.unreachable() {
            let until = self
                .keeper
                .lapse()
                .map(|(_, at)| super::clock(at))
                .unwrap_or_default();
            self.progress.warn(&format!(
                "cannot renew the reservation of {} ({why}); it lapses at {until} unless the remote answers",
                lane.item
            ));
        }
        Ok(())
    }

    pub(super) fn work(&self, item: &queue::Item) -> Result<ItemEnd, CliError> {
        let lane = {
            let _lock = self.lock()?;
            lanes::open(&self.repo, &self.options.remote, &item.id, "HEAD").map_err(|e| {
                CliError::failure(format!("cannot open the lane of {}", item.id))
                    .caused_by(e.to_string())
            })?
        };
        // A landing that was cut short (the branch pushed and the land command run, the
        // mark not yet written) is finished, not done again.
        if self.landing_marker(item).exists() {
            if let Err(why) = self.enter(&lane, "land") {
                return Ok(ItemEnd::Lost(why));
            }
            let _lock = self.lock()?;
            return Ok(self.finish_landing(item, &lane));
        }
        let mut feedback: Option<String> = None;
        for round in 1..=self.options.max_rounds {
            if round > 1 && self.stop.load(Ordering::SeqCst) {
                return Ok(ItemEnd::Stopped(lane.branch));
            }
            // implement
            if let Err(why) = self.enter(&lane, "implement") {
                return Ok(ItemEnd::Lost(why));
            }
            if !self.pace() {
                return Ok(ItemEnd::Stopped(lane.branch));
            }
            let prompt = implement_prompt(item, feedback.as_deref());
            let message = format!("stet: {} (round {round})", item.title);
            let call = self.agent_call(item, &lane, Role::Implement, &prompt, Some(&message))?;
            if let Some(end) = self.push(&lane)? {
                return Ok(end);
            }
            match call.kind {
                OutcomeCode::DONE => {}
                OutcomeCode::RATE_LIMITED => return Ok(ItemEnd::RateLimited(call.retry_at)),
                _ => return Ok(ItemEnd::RunnerFailed(format!("implement: {}", call.detail))),
            }
            if self.stop.load(Ordering::SeqCst) {
                return Ok(ItemEnd::Stopped(lane.branch));
            }
            // check
            if let Some(check) = &self.options.check {
                if let Err(why) = self.enter(&lane, "check") {
                    return Ok(ItemEnd::Lost(why));
                }
                let (passed, output) = match self.check(&lane, check) {
                    Ok(checked) => checked,
                    // The check could not run at all (the runtime failed): a runner failure,
                    // which counts toward an outage, not the end of the drive.
                    Err(e) => return Ok(ItemEnd::RunnerFailed(format!("check: {e}"))),
                };
                if !passed {
                    note!(self.progress, "{}: the check failed", item.id);
                    feedback = Some(format!("The check `{check}` failed:\n{output}"));
                    continue;
                }
            }
            // review
            if let Err(why) = self.enter(&lane, "review") {
                return Ok(ItemEnd::Lost(why));
            }
            if !self.pace() {
                return Ok(ItemEnd::Stopped(lane.branch));
            }
            // What the reviewer judges: everything the lane adds to the repository's HEAD
            // (the lane was brought back and pushed after implementing).
            let base = lanes::git(
                &self.repo,
                &["merge-base", "HEAD", &format!("refs/heads/{}", lane.branch)],
            )
            .unwrap_or_else(|_| "HEAD~1".to_string());
            let call =
                self.agent_call(item, &lane, Role::Review, &review_prompt(item, &base), None)?;
            match call.kind {
                OutcomeCode::DONE => {}
                OutcomeCode::RATE_LIMITED => return Ok(ItemEnd::RateLimited(call.retry_at)),
                _ => return Ok(ItemEnd::JudgeFailed(format!("review: {}", call.detail))),
            }
            let verdict = call.detail.trim().to_string();
            if verdict.to_ascii_uppercase().starts_with("LAND") {
                if let Err(why) = self.enter(&lane, "land") {
                    return Ok(ItemEnd::Lost(why));
                }
                return self.land(item, &lane);
            }
            note!(self.progress, "{}: the reviewer asked for changes", item.id);
            feedback = Some(format!("The reviewer asked for changes:\n{verdict}"));
        }
        Ok(ItemEnd::GaveUp(format!(
            "not landed after {} rounds",
            self.options.max_rounds
        )))
    }

    /// Pushes the lane's branch under the drain lock, if the reservation is still this
    /// drive's. `Some` ends the lane's work: the reservation was taken over, the remote
    /// refused the push (someone else moved the branch), or it did not answer.
    fn push(&self, lane: &Lane) -> Result<Option<ItemEnd>, CliError> {
        let _lock = self.lock()?;
        if let Some(why) = self.keeper.lost() {
            return Ok(Some(ItemEnd::Lost(why)));
        }
        Ok(match lane.push(&self.repo, &self.options.remote) {
            Ok(()) => None,
            Err(e) if lanes::push_refused(&e) => Some(ItemEnd::Lost(format!(
                "the remote refused the push of {}: another drive moved the branch",
                lane.branch
            ))),
            Err(e) => Some(ItemEnd::RemoteUnreachable(e.detail)),
        })
    }

    /// Where this clone remembers a landing in progress, so that a landing cut short (a
    /// crash, an unreachable remote) is finished by the next attempt instead of redone.
    fn landing_marker(&self, item: &queue::Item) -> std::path::PathBuf {
        receipts::git_dir(&self.repo)
            .join("stet/landing")
            .join(&item.id)
    }

    /// Lands the lane: pushes its branch, runs the configured land command on the host
    /// (once: a marker remembers it ran), marks the item landed on the remote, and removes
    /// the working copy.
    fn land(&self, item: &queue::Item, lane: &Lane) -> Result<ItemEnd, CliError> {
        if let Some(end) = self.push(lane)? {
            return Ok(end);
        }
        let _lock = self.lock()?;
        if let Some(command) = &self.options.land {
            // The land command runs on the host, as the person: it is the one step that may
            // need the person's own credentials (to open a pull request, say).
            let status = std::process::Command::new("sh")
                .args(["-c", command])
                .current_dir(&self.repo)
                .env("STET_ITEM", &item.id)
                .env("STET_BRANCH", &lane.branch)
                .env("STET_REMOTE", &self.options.remote)
                .status();
            match status {
                Ok(s) if s.success() => {}
                Ok(s) => self.progress.warn(&format!(
                    "{}: the land command `{command}` failed ({s}); the branch is pushed",
                    item.id
                )),
                Err(e) => self.progress.warn(&format!(
                    "{}: cannot run the land command `{command}`: {e}; the branch is pushed",
                    item.id
                )),
            }
        }
        let marker = self.landing_marker(item);
        if let Err(e) = receipts::write_durably(&marker, lane.branch.as_bytes()) {
            self.progress.warn(&format!(
                "{}: cannot remember the landing in {}: {e}",
                item.id,
                marker.display()
            ));
        }
        Ok(self.finish_landing(item, lane))
    }

    /// Marks the item landed on the remote and forgets the lane (under the drain lock).
    fn finish_landing(&self, item: &queue::Item, lane: &Lane) -> ItemEnd {
        if let Err(e) = self.remote().mark_landed(
            &item.id,
            &format!("landed {} by run {}", lane.branch, self.run),
        ) {
            // The marker stays: the next attempt only writes the mark.
            return ItemEnd::RemoteUnreachable(e.to_string());
        }
        let _ = std::fs::remove_file(self.landing_marker(item));
        lane.remove();
        ItemEnd::Landed
    }

    /// Before a launch: the pace since the last one. Returns false when a stop cut the
    /// wait short (no agent is launched then).
    fn pace(&self) -> bool {
        let pace = self.options.pace_secs;
        if let Some(last) = self.last_launch.get().filter(|_| pace > 0) {
            let next = last + pace;
            if (now_ms() / 1000) as i64 <= next && !self.wait("pace between agent launches", next) {
                return false;
            }
        }
        self.last_launch.set(Some((now_ms() / 1000) as i64));
        true
    }

    /// One agent call, with its receipt recorded before it starts and when it ends. With
    /// `commit`, what the agent left in the working copy is committed with that message
    /// before the receipt, so the receipt's commit-after holds the call's work.
    fn agent_call(
        &self,
        item: &queue::Item,
        lane: &Lane,
        role: Role,
        prompt: &str,
        commit: Option<&str>,
    ) -> Result<Call, CliError> {
        let role_word = match role {
            Role::Implement => "implement",
            Role::Review => "review",
            Role::Proof => "proof",
        };
        // The walled settings must still be exactly what the drive wrote at its start.
        if let Some(w) = self
            .harness
            .check_walls(&self.profile)?
            .into_iter()
            .find(|w| w.wall.as_str() == stet_plugin_api::wall::SETTINGS_EXACT && !w.held())
        {
            return Err(CliError::new(Exit::Unusable, "the walled settings changed during the drive; it stops")
                .caused_by(w.detail.to_string())
                .hint("do not edit the profile's settings while a drive runs; start the drive again to rewrite them"));
        }
        // A fresh copy of the profile for this call alone.
        let call_profile = harness::CallProfile::of(&self.profile)?;
        let launch = self.harness.launch(RoleRequest {
            role,
            prompt: prompt.into(),
            profile_dir: call_profile.dir.clone().into(),
            workdir: lane.dir.display().to_string().into(),
        })?;
        let started = now_ms();
        let id = format!("{started}-{}-{role_word}", item.id);
        let mut call = receipts::CallContext {
            log: receipts::log_path(&self.repo, &id),
            id,
            run: self.run.clone(),
            item: item.id.clone(),
            lane: lane.branch.clone(),
            role: role_word,
            runtime: &self.runtime_record,
            runtime_reason: &self.runtime.selection.reason,
            harness: &self.harness_record,
            image: &self.settings.image,
            network: describe(&launch.network),
            limits: self.settings.limits.describe(),
            started_unix_ms: started,
            ended_unix_ms: started,
            commit_before: lane.head().unwrap_or_default(),
            commit_after: String::new(),
        };
        receipts::record_start(&self.repo, &call)
            .map_err(|e| CliError::failure(format!("cannot record the receipt: {e}")))?;
        let progress = &self.progress;
        let follow = |_: stet_plugin_api::Stream, bytes: &[u8]| progress.follow(bytes);
        // Review judges the lane; the mount, not the guard, keeps it from changing it.
        let access = match role {
            Role::Review => LaneAccess::ReadOnly,
            _ => LaneAccess::ReadWrite,
        };
        let ran = harness::run_launch(
            self.settings,
            &self.runtime,
            &launch,
            Plan::new(role_word, &self.run, &lane.dir.display().to_string())
                .with_lane(LaneMounts::of_lane(lane), access),
            harness::Watch {
                in_flight: Some(&self.in_flight),
                time_limit: Some(std::time::Duration::from_secs(self.options.call_limit_secs)),
                follow: self.options.follow.then_some(&follow as _),
                env: vec![EnvVar::new("STET_RECEIPT", call.id.clone())],
            },
            Some(&call.log),
        )
        .and_then(|output| {
            let outcome = harness::outcome_of(&self.harness, role, &output)?;
            Ok((output, outcome))
        });
        // The runtime or the harness failing (a sandbox that cannot start, an output the
        // harness cannot read) is this call failing: recorded, and counted toward an
        // outage by the caller, not the end of the drive.
        let (output, outcome) = match ran {
            Ok(ran) => ran,
            Err(e) => (
                harness::LaunchOutput::none(call.network.clone()),
                stet_plugin_api::CallOutcome {
                    kind: OutcomeCode::FAILED,
                    detail: e.to_string().lines().collect::<Vec<_>>().join("; ").into(),
                    retry_at_unix: ROption::RNone,
                    cost_usd: ROption::RNone,
                    usage: Default::default(),
                },
            ),
        };
        call.network = output.network.clone();
        call.ended_unix_ms = now_ms();
        let carried = call_profile.settle(&self.harness, &self.profile);
        if let Some(message) = commit {
            let _lock = self.lock()?;
            if let Err(e) = lane.commit_all(message) {
                self.progress
                    .warn(&format!("{}: cannot commit the agent's work: {e}", item.id));
            }
        }
        call.commit_after = lane.head().unwrap_or_default();
        let mut end = harness::call_end(&output, &outcome);
        match carried {
            Ok(files) => end.profile_carried = files,
            Err(e) => self
                .progress
                .warn(&format!("{}: {e}", item.id).replace('\n', "; ")),
        }
        receipts::record_end(&self.repo, call, end)
            .map_err(|e| CliError::failure(format!("cannot record the receipt: {e}")))?;
        Ok(Call {
            kind: outcome.kind,
            detail: outcome.detail.to_string(),
            retry_at: outcome.retry_at_unix.into_option(),
        })
    }

    /// The repository's check command in a fresh sandbox on the lane: passed, and the tail
    /// of its output (all of it is in its log beside the receipts). Whatever the check
    /// wrote in the lane is restored away afterwards: it never reaches the landed branch.
    fn check(&self, lane: &Lane, command: &str) -> Result<(bool, String), CliError> {
        let dir = lane.dir.display().to_string();
        let plan = Plan::new("check", &self.run, &dir)
            .with_lane(LaneMounts::of_lane(lane), LaneAccess::ReadWrite);
        let sandbox = Sandbox::create(&self.runtime, plan.spec(self.settings))?;
        let process = sandbox.spawn(stet_plugin_api::ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), command.into()].into(),
            env: Default::default(),
            workdir: ROption::RNone,
            stdin: Default::default(),
        })?;
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) = Some(process.clone());
        let limit = std::time::Duration::from_secs(self.options.call_limit_secs);
        let watchdog = sandbox::Watchdog::start(&process, limit);
        let disk = sandbox::DiskWatch::start(&process, &lane.dir, self.settings.limits.disk_bytes);
        let log = receipts::log_path(&self.repo, &format!("{}-{}-check", now_ms(), lane.item));
        let mut output = crate::capture::Capture::new(Some(&log), 32 * 1024)
            .map_err(|e| CliError::failure(format!("cannot write {}: {e}", log.display())))?;
        let (progress, follow) = (&self.progress, self.options.follow);
        let status = process.wait(&mut |_, bytes| {
            if follow {
                progress.follow(bytes);
            }
            output.push(bytes);
        });
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let status = status?;
        let events = sandbox.limit_events();
        drop(sandbox);
        let tail = String::from_utf8_lossy(&output.finish().unwrap_or_default()).into_owned();
        let restored = lane.restore();
        let limits = &self.settings.limits;
        let why = if watchdog.fired() {
            Some(format!(
                "the check did not finish within {} (--call-limit) and was killed",
                humantime::format_duration(limit)
            ))
        } else if disk.exceeded() {
            Some(harness::LimitReached::Disk(limits.disk_bytes).describe())
        } else if status.out_of_memory || (events.oom_kills > 0 && !status.success()) {
            Some(harness::LimitReached::Memory(limits.memory_bytes).describe())
        } else if events.pids_refused > 0 && !status.success() {
            Some(harness::LimitReached::Pids(events.pids_refused, limits.pids).describe())
        } else {
            None
        };
        if let Err(e) = restored {
            return Err(CliError::failure(format!(
                "cannot restore the lane {} after its check",
                lane.branch
            ))
            .caused_by(e.to_string()));
        }
        Ok(match why {
            Some(why) => (false, format!("{why}\n{tail}")),
            None => (status.success(), tail),
        })
    }
}

/// The network a launch asks for, as the receipt names it before the call.
fn describe(network: &stet_plugin_api::Network) -> String {
    match network {
        stet_plugin_api::Network::None => "none".into(),
        stet_plugin_api::Network::Open => "open".into(),
        stet_plugin_api::Network::AllowHosts(hosts) => format!(
            "open (the agent needs {})",
            hosts
                .iter()
                .map(|h| h.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn implement_prompt(item: &queue::Item, feedback: Option<&str>) -> String {
    let mut prompt = format!(
        "You are working in a git working copy on its own branch. Do what this work item asks, \
         and nothing else:\n\n{}\n",
        item.text.trim()
    );
    if let Some(feedback) = feedback {
        prompt.push_str(&format!(
            "\nYour previous attempt was not accepted.\n{feedback}\n"
        ));
    }
    prompt.push_str("\nLeave your changes in the working copy; stet commits and pushes them.");
    prompt
}

fn review_prompt(item: &queue::Item, base: &str) -> String {
    format!(
        "You are reviewing a change made for this work item:\n\n{}\n\nSee it with `git diff {base}`. \
         Answer with LAND on the first line if the change does what was asked and nothing else, \
         or with REVISE on the first line followed by what must change.",
        item.text.trim()
    )
}
