//! Keeping the person's stored login fresh: the one place a real login enters a sandbox.
//!
//! An agent's sandbox holds stand-ins whose login never expires during a call, and reaches
//! no OAuth host, so it never renews anything. The real login does expire, and stet does not
//! speak the OAuth protocol itself: before a call whose login would expire before the call
//! could end, [`keep_fresh`] lets the harness's own agent renew it, in a sandbox of its own
//! (THREATS.md names it as the exception):
//!
//! - on a copy of the login alone, made by the harness into a private directory (never the
//!   profile, never a lane);
//! - in the person's image, never an untrusted repository file's (`Settings::login_image`);
//! - with no tools, and a model API that is stet's stub (`stet_egress::stub`), which answers
//!   at once and sends nothing anywhere, so no model reply can ask for anything;
//! - reaching only the hosts the refresh launch declares (the login's own server), through
//!   stet's proxy, the same network wall as every sandbox;
//! - whatever the copy holds afterwards is data: the harness checks the renewed login by its
//!   shape before it replaces the old one, atomically.
//!
//! Renewals of one profile are serialised by a lock beside it, and the expiry is read again
//! under the lock: two drives on one profile renew once (a renewed refresh token replaces
//! the old one, so a second renewal with the old one would fail).

use std::path::Path;
use std::time::Duration;

use stet_plugin_api::Profile;

use crate::error::{Concept, Error};
use crate::harness::{self, OpenHarness};
use crate::sandbox::{OpenRuntime, Plan};
use crate::settings::Settings;

/// How long a refresh may take (the CLI's own attempts at the OAuth host included).
const REFRESH_LIMIT: Duration = Duration::from_secs(120);

/// A login renewed early enough has this much to spare beyond the call it was renewed for.
const MARGIN: Duration = Duration::from_secs(5 * 60);

/// Makes sure the stored login in `profile` is accepted for the next `within` (a call's time
/// limit): renews it first when it would not be. Returns the new expiry (ms since the epoch)
/// when it renewed, `None` when nothing was due; `note` is told what happens.
pub fn keep_fresh(
    settings: &Settings,
    runtime: &OpenRuntime,
    harness: &OpenHarness,
    profile: &Profile,
    within: Duration,
    note: &dyn Fn(&str),
) -> Result<Option<u64>, Error> {
    keep_fresh_at(&now_ms, settings, runtime, harness, profile, within, note)
}

/// [`keep_fresh`], with now read from `now_ms` (milliseconds since the epoch): the drive
/// passes its own clock, so that a login's expiry is judged on the time its waits and
/// reservations are.
pub fn keep_fresh_at(
    now_ms: &dyn Fn() -> u64,
    settings: &Settings,
    runtime: &OpenRuntime,
    harness: &OpenHarness,
    profile: &Profile,
    within: Duration,
    note: &dyn Fn(&str),
) -> Result<Option<u64>, Error> {
    let due =
        |expiry: u64| expiry != 0 && expiry < now_ms().saturating_add(millis(within + MARGIN));
    if !due(harness.login_expiry(profile)?) {
        return Ok(None);
    }
    let dir = Path::new(profile.dir.as_str());
    let lock = lock_path(dir);
    let _held = crate::files::lock_exclusive(&lock).map_err(|e| {
        Concept::Login.failure(format!(
            "cannot lock {} to renew the login: {e}",
            lock.display()
        ))
    })?;
    // Another drive may have renewed it while this one waited.
    if !due(harness.login_expiry(profile)?) {
        return Ok(None);
    }
    note(&format!(
        "{}: the stored login in {} expires before a call could end; renewing it in a sandbox of its own (no tools, stet's stub for a model)",
        harness.name, profile.dir
    ));
    let scratch = crate::sandbox::leftovers::temp_dir("stet-refresh-")
        .map_err(|e| Concept::Login.failure(format!("cannot make the refresh's directory: {e}")))?;
    let work_dir = scratch.path().join("login");
    std::fs::create_dir(&work_dir)
        .map_err(|e| Concept::Login.failure(format!("cannot make the refresh's directory: {e}")))?;
    let launch = harness.refresh_launch(profile, &work_dir)?;
    let run = format!("refresh-{}", std::process::id());
    // Never an untrusted repository's image: its code would run beside the real login.
    let settings = &Settings {
        image: settings.login_image.clone(),
        ..settings.clone()
    };
    let output = harness::run_launch(
        settings,
        runtime,
        &launch,
        Plan::new("refresh", &run, "/tmp"),
        harness::Watch {
            time_limit: Some(REFRESH_LIMIT),
            stub_model_api: true,
            ..harness::Watch::default()
        },
        None,
    )?;
    let expires = harness.settle_refresh(profile, &work_dir).map_err(|e| {
        let mut e = e;
        if let Some(limit) = output.timed_out {
            e = e.caused_by(format!("the refresh was killed after {limit:?}"));
        }
        for b in &output.blocked {
            e = e.caused_by(format!(
                "its proxy refused {} ({}): {}",
                b.target, b.count, b.why
            ));
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        match stderr.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(last) => e.caused_by(format!("it said: {last}")),
            None => e,
        }
    })?;
    note(&format!(
        "{}: renewed the stored login; it is good for {} more",
        harness.name,
        humantime::format_duration(Duration::from_secs(expires.saturating_sub(now_ms()) / 1000))
    ));
    Ok(Some(expires))
}

/// The lock beside the profile (not in it: the profile is copied for every call).
fn lock_path(profile: &Path) -> std::path::PathBuf {
    let name = profile
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    profile.with_file_name(format!(".{name}.refresh.lock"))
}

use crate::timestamp::now_ms;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
