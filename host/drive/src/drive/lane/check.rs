//! The check stage: the repository's check command in a fresh sandbox on the lane, with a
//! receipt like an agent call's; passed moves on to the review, failed counts the round.

use stet_plugin_api::ROption;

use crate::checkpoints::{Checkpoint, Next};
use crate::error::{Concept, Error};
use crate::harness;
use crate::lanes::Lane;
use crate::queue;
use crate::receipts;
use crate::sandbox::{self, LaneAccess, LaneMounts, Plan, Sandbox};

use super::super::ahead::Ahead;
use super::super::note;
use super::super::state::ItemEnd;
use super::super::worker::{indent, tail, Worker};
use super::call::counts_toward_outage;
use super::Moved;
impl Worker<'_, '_> {
    /// The repository's check on this round's work: passed moves on to the review; failed
    /// counts the round and gives the next one its output.
    pub(in crate::drive) fn checked<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        at: &Checkpoint,
        ahead: &mut Ahead<'_, 'env>,
    ) -> Result<Moved, Error> {
        let Some(check) = &self.drive.options.check else {
            return Ok(Moved::On(Checkpoint {
                next: Next::Review,
                ..at.clone()
            }));
        };
        if let Err(end) = self.enter(lane, "check") {
            return Ok(Moved::End(end));
        }
        let outcome = match self.check(item, lane, at.round, check, ahead.take_check()) {
            Ok(outcome) => outcome,
            // The check could not run at all (the runtime failed): infrastructure.
            Err(e) if counts_toward_outage(&e) => {
                return Ok(Moved::End(ItemEnd::RunnerFailed(format!(
                    "check: {}",
                    e.to_string().replace('\n', "; ")
                ))))
            }
            // Refused by the walls: the item's, as for its calls.
            Err(e) => {
                return Ok(Moved::Fail(format!(
                    "the check was not run: {}",
                    e.to_string().replace('\n', "; ")
                )))
            }
        };
        if outcome.passed {
            note!(
                self.drive.progress,
                "{}: the check `{check}` passed",
                item.id
            );
            return Ok(Moved::On(Checkpoint {
                next: Next::Review,
                receipt: Some(outcome.receipt),
                run: self.drive.run.clone(),
                ..at.clone()
            }));
        }
        let shown = tail(&outcome.output, 12, 4096);
        note!(
            self.drive.progress,
            "{}: round {} of {}: the check `{check}` failed; its output ends:\n{}",
            item.id,
            at.round,
            self.drive.options.max_rounds,
            indent(if shown.is_empty() {
                "(no output)"
            } else {
                &shown
            })
        );
        let last = failure_summary(&outcome.output);
        Ok(Moved::On(Checkpoint {
            round: at.round + 1,
            next: Next::Implement,
            feedback: Some(format!(
                "The check `{check}` failed. Its output ends:\n{}",
                tail(&outcome.output, 200, 16 * 1024)
            )),
            reason: Some(format!("the check `{check}` failed: {last}")),
            receipt: Some(outcome.receipt),
            head: String::new(),
            run: self.drive.run.clone(),
        }))
    }

    /// A fresh sandbox for the repository's check on the lane.
    /// On a seeded lane it works at the setup's path ([`crate::seeds::ALIAS`]), where the
    /// lane is mounted too: a build there finds what the setup built at the paths it was
    /// built at (cargo compares them), and rebuilds only what the lane changed.
    pub(in crate::drive) fn check_sandbox(&self, lane: &Lane) -> Result<Sandbox<'_>, Error> {
        let mounts = LaneMounts::of_lane(lane);
        let workdir = match &mounts.also_at {
            Some(alias) => alias.display().to_string(),
            None => lane.dir.display().to_string(),
        };
        let plan =
            Plan::new("check", &self.drive.run, &workdir).with_lane(mounts, LaneAccess::ReadWrite);
        Sandbox::create(&self.drive.runtime, plan.spec(self.drive.settings))
    }

    /// The repository's check command in a fresh sandbox on the lane, with a receipt
    /// (role `check`) like an agent call's: its whole output is in its log, its tail in
    /// the outcome. Whatever the check wrote in the lane is restored away afterwards: it
    /// never reaches the landed branch.
    pub(in crate::drive) fn check<'env>(
        &'env self,
        item: &queue::Item,
        lane: &Lane,
        round: u32,
        command: &str,
        made: Option<Sandbox<'env>>,
    ) -> Result<Checked, Error> {
        let started = self.drive.clock.now_ms();
        let id = format!("{started}-{}-check", item.id);
        let no_harness = receipts::PluginRecord {
            name: String::new(),
            version: String::new(),
            library_sha256: String::new(),
        };
        let mut call = self.walled().context(crate::call::Made {
            log: receipts::log_path(&self.drive.repo, &id),
            // No agent is asked anything: the check's command is in the settings.
            prompt: None,
            id,
            run: self.drive.run.clone(),
            item: item.id.clone(),
            lane: lane.branch.clone(),
            role: receipts::CallRole::Check,
            round: Some(round),
            network: "none".to_string(),
            started_unix_ms: started,
            commit_before: lane.head().unwrap_or_default(),
            runtime: &self.drive.runtime_record,
            harness: &no_harness,
        });
        let sandbox = match made {
            Some(sandbox) => sandbox,
            None => self.check_sandbox(lane)?,
        };
        receipts::record_start(&self.drive.repo, &call)
            .map_err(|e| Concept::Drive.failure(format!("cannot record the receipt: {e}")))?;
        let process = sandbox.spawn(stet_plugin_api::ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), command.into()].into(),
            env: Default::default(),
            workdir: ROption::RNone,
            stdin: Default::default(),
        })?;
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) = Some(process.clone());
        let limit = std::time::Duration::from_secs(self.drive.options.call_limit_secs);
        let watchdog = sandbox::Watchdog::start(&process, limit);
        let limits = &self.drive.settings.limits;
        let disk = sandbox::DiskWatch::start(
            &process,
            vec![lane.dir.clone()],
            Vec::new(),
            crate::files::Footprint {
                bytes: limits.disk_bytes,
                files: limits.files,
            },
        );
        let mut output = crate::capture::Capture::new(Some(&call.log), 32 * 1024).map_err(|e| {
            Concept::Drive.failure(format!("cannot write {}: {e}", call.log.display()))
        })?;
        let (progress, follow) = (&self.drive.progress, self.drive.options.follow);
        let status = process.wait(&mut |_, bytes| {
            if follow {
                progress.follow(bytes);
            }
            output.push(bytes);
        });
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let status = status?;
        let events = sandbox.limit_events();
        sandbox.retire(Some(self.reaper));
        let output_bytes = output.total();
        let (kept, log_cut_bytes) = output.finish_counting().unwrap_or_default();
        let kept = String::from_utf8_lossy(&kept).into_owned();
        // What the check left is measured before the restore takes it away.
        let disk_met = disk.met();
        let restored = lane.restore();
        let why = self.check_stopped(watchdog.fired(), disk_met, &status, &events);
        if let Err(e) = restored {
            return Err(Concept::Drive
                .failure(format!(
                    "cannot restore the lane {} after its check",
                    lane.branch
                ))
                .caused_by(e.to_string()));
        }
        let passed = why.is_none() && status.success();
        let shown = match &why {
            Some(why) => format!("{kept}\n{why}"),
            None => kept,
        };
        call.ended_unix_ms = self.drive.clock.now_ms();
        call.commit_after = lane.head().unwrap_or_default();
        let receipt = call.id.clone();
        let end = receipts::CallEnd {
            exit_code: status.code.into_option(),
            exit_signal: status.signal.into_option(),
            outcome: if passed {
                receipts::Outcome::Passed
            } else {
                receipts::Outcome::Failed
            },
            detail: tail(&shown, 12, 4096),
            output_bytes,
            log_cut_bytes,
            ..Default::default()
        };
        receipts::record_end(&self.drive.repo, call, end)
            .map_err(|e| Concept::Drive.failure(format!("cannot record the receipt: {e}")))?;
        Ok(Checked {
            passed,
            output: shown,
            receipt,
        })
    }
}

impl Worker<'_, '_> {
    /// Why the check was stopped, if a limit stopped it: the call limit (its watchdog
    /// fired), the disk limit, memory or processes (as the sandbox's counters say).
    fn check_stopped(
        &self,
        timed_out: bool,
        disk_met: Option<sandbox::DiskMet>,
        status: &stet_plugin_api::ExitStatus,
        events: &sandbox::LimitEvents,
    ) -> Option<String> {
        let limits = &self.drive.settings.limits;
        if timed_out {
            Some(format!(
                "the check did not finish within {} (--call-limit) and was killed",
                humantime::format_duration(std::time::Duration::from_secs(
                    self.drive.options.call_limit_secs
                ))
            ))
        } else if disk_met == Some(sandbox::DiskMet::Bytes) {
            Some(harness::LimitReached::Disk(limits.disk_bytes).describe())
        } else if disk_met == Some(sandbox::DiskMet::Files) {
            Some(harness::LimitReached::Files(limits.files).describe())
        } else if status.out_of_memory || (events.oom_kills > 0 && !status.success()) {
            Some(harness::LimitReached::Memory(limits.memory_bytes).describe())
        } else if events.pids_refused > 0 && !status.success() {
            Some(harness::LimitReached::Pids(events.pids_refused, limits.pids).describe())
        } else {
            None
        }
    }
}

/// How a check ended.
pub(in crate::drive) struct Checked {
    pub passed: bool,
    /// Its output as kept (the tail is what matters), and why it was stopped, if it was.
    pub output: String,
    /// Its receipt.
    pub receipt: String,
}

/// What a failed check's output says went wrong, in one line a person can act on: the test
/// runner's own failure summary where it has one — pytest's `FAILED`/`ERROR` lines, the
/// tests cargo's harness reports `FAILED`, a compiler's first error and where — else the
/// output's last line.
pub(in crate::drive) fn failure_summary(output: &str) -> String {
    const SHOWN: usize = 3;
    let listed = |found: Vec<String>, what: &str| {
        let more = found.len().saturating_sub(SHOWN);
        let mut line = found.into_iter().take(SHOWN).collect::<Vec<_>>().join("; ");
        if more > 0 {
            line.push_str(&format!("; and {more} more {what}"));
        }
        line
    };
    let lines: Vec<&str> = output.lines().map(str::trim_end).collect();
    // pytest's short test summary (`-ra`, or its default failures list).
    let pytest: Vec<String> = lines
        .iter()
        .filter(|l| l.starts_with("FAILED ") || l.starts_with("ERROR "))
        .map(|l| l.to_string())
        .collect();
    if !pytest.is_empty() {
        return listed(pytest, "failing");
    }
    // cargo's test harness: `test name ... FAILED`.
    let cargo: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let name = l.strip_prefix("test ")?.strip_suffix(" ... FAILED")?;
            Some(format!("test {name} failed"))
        })
        .collect();
    if !cargo.is_empty() {
        return listed(cargo, "failing");
    }
    // A compiler's first error, with where it points (rustc's `-->`, else `file:line:`).
    if let Some(i) = lines.iter().position(|l| {
        l.starts_with("error[") || (l.starts_with("error: ") && !l.contains("could not compile"))
    }) {
        let at = lines
            .iter()
            .skip(i + 1)
            .take(3)
            .find_map(|l| l.trim_start().strip_prefix("--> "));
        return match at {
            Some(at) => format!("{} at {at}", lines[i]),
            None => lines[i].to_string(),
        };
    }
    lines
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or_else(|| "no output".to_string(), |l| l.to_string())
}

#[cfg(test)]
mod tests {
    use super::failure_summary;

    #[test]
    fn a_failed_checks_reason_is_its_runners_summary_not_its_last_line() {
        let pytest = "tests/test_a.py F.E\n=== short test summary info ===\n\
                      FAILED tests/test_a.py::test_one - assert 1 == 2\n\
                      ERROR tests/test_a.py::test_two - ImportError\n\
                      === 1 failed, 1 passed, 1 error in 0.1s ===\n";
        assert_eq!(
            failure_summary(pytest),
            "FAILED tests/test_a.py::test_one - assert 1 == 2; ERROR tests/test_a.py::test_two - ImportError"
        );
        let many: String = (0..5).map(|i| format!("FAILED t.py::t{i}\n")).collect();
        assert_eq!(
            failure_summary(&many),
            "FAILED t.py::t0; FAILED t.py::t1; FAILED t.py::t2; and 2 more failing"
        );
        let cargo = "running 2 tests\ntest a::works ... ok\ntest a::parses ... FAILED\n\nfailures:\n\
                     test result: FAILED. 1 passed; 1 failed\nerror: test failed, to rerun pass `--lib`\n";
        assert_eq!(failure_summary(cargo), "test a::parses failed");
        let rustc = "   Compiling x v0.1.0\nerror[E0425]: cannot find value `y` in this scope\n \
                     --> src/lib.rs:3:5\n  |\nerror: could not compile `x`\n";
        assert_eq!(
            failure_summary(rustc),
            "error[E0425]: cannot find value `y` in this scope at src/lib.rs:3:5"
        );
        assert_eq!(
            failure_summary("make: *** [test] Error 2\n\n"),
            "make: *** [test] Error 2"
        );
        assert_eq!(failure_summary(""), "no output");
    }
}
