//! What a person does to an item on the remote — `stet retry` and `stet rm` — as library
//! functions with typed outcomes: the CLI prints them in its own words, and `stet board`
//! acts through the same functions (its forms never reach the remote another way).

use std::path::Path;

use crate::reservations::{Remote, ReservationError};

/// How [`retry`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retried {
    /// The marks it had (`failed`, `cancelled`) are cleared, and its lane starts again at
    /// the next drive.
    Cleared(Vec<&'static str>),
    /// It had neither mark (asked twice, or of an open item): already so.
    Already,
}

/// Why [`retry`] did nothing.
#[derive(Debug)]
pub enum RetryRefused {
    /// It has landed: nothing undoes a landing.
    Landed,
    /// The remote did not answer.
    Unreachable(ReservationError),
}

/// Clears `item`'s failed and cancelled marks on `remote` (the one way either is undone:
/// `stet clean` never does) so the next drive takes it up again; its lane's checkpoint
/// says it was retried.
pub fn retry(repo: &Path, remote: &str, item: &str) -> Result<Retried, RetryRefused> {
    let remote = Remote { repo, name: remote };
    let had = remote
        .clear_for_retry(item)
        .and_then(|had| {
            if !had.is_empty() {
                remote.restart(item)?;
            }
            Ok(had)
        })
        .map_err(RetryRefused::Unreachable)?;
    if !had.is_empty() {
        return Ok(Retried::Cleared(had));
    }
    // Asked twice, or of an item no mark keeps off a drive: already so, as `stet rm` of a
    // cancelled item is (a landed item alone is refused: nothing undoes a landing).
    let marks = remote.marks_for(item).map_err(RetryRefused::Unreachable)?;
    if marks.landed.contains(item) {
        return Err(RetryRefused::Landed);
    }
    Ok(Retried::Already)
}

/// How [`cancel`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// Marked cancelled now: no drive takes it, and a drive working it stops at its next
    /// move.
    Now,
    /// It was cancelled already.
    Already,
}

/// Why [`cancel`] did nothing.
#[derive(Debug)]
pub enum CancelRefused {
    /// It has landed: there is nothing to cancel.
    Landed,
    /// The remote did not answer.
    Unreachable(ReservationError),
}

/// Marks `item` cancelled on `remote`, the mark saying by whom (the repository's git
/// identity, else `by_default`) and when (`now_unix`).
pub fn cancel(
    repo: &Path,
    remote: &str,
    item: &str,
    by_default: &str,
    now_unix: i64,
) -> Result<Cancelled, CancelRefused> {
    let remote = Remote { repo, name: remote };
    let marks = remote.marks_for(item).map_err(CancelRefused::Unreachable)?;
    if marks.landed.contains(item) {
        return Err(CancelRefused::Landed);
    }
    if marks.cancelled.contains(item) {
        return Ok(Cancelled::Already);
    }
    let by = crate::git::Person::of_repository(repo)
        .map(|p| format!("{} <{}>", p.name, p.email))
        .unwrap_or_else(|| by_default.to_string());
    remote
        .mark_cancelled(
            item,
            &format!("cancelled by {by} at {}", crate::timestamp::clock(now_unix)),
        )
        .map_err(CancelRefused::Unreachable)?;
    Ok(Cancelled::Now)
}
