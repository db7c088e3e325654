//! Handles: the short names a person types for items (`stet show fix-typo-readme`).
//!
//! An item's handle is its id without the time `stet add` starts it with
//! ([`queue::handle_of`]), so every clone derives it offline; `stet add` chooses it from the
//! title's key words ([`queue::handle_from_title`], why a slug and not a number is said
//! there). A handle is unique in the queue on the remote: `stet add` skips any handle an
//! item of the working copy or of the remote's base already has, then *claims* the one it
//! chose on the remote with a create-only push of `refs/stet/handles/<handle>` (a commit
//! whose message names the id). The remote applies that push atomically, so of two clones
//! adding the same title at once exactly one gets the handle; the other's push is refused,
//! and it takes the next (`-2`, `-3`, …). A claim is never removed: a handle names one item
//! for good (receipts and branches keep the id it stands for). When the remote does not
//! answer, the item is written all the same, its handle free only as far as this clone
//! knows, and the person is told so.
//!
//! Resolution ([`resolve`]): an exact id, then an exact handle, then a unique start of a
//! handle or an id.

use std::collections::HashSet;
use std::path::Path;

use crate::queue::{self, Item};
use crate::reservations::{Remote, ReservationError};

/// Where handles are claimed on the remote.
pub const PREFIX: &str = "refs/stet/handles/";

/// Whether the handle of a new item is claimed on the remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The remote holds the claim: no other clone's item gets this handle.
    Claimed,
    /// The remote could not be asked (why, in words): the handle is free as far as this
    /// clone knows, and another clone may give it to another item.
    NotClaimed(String),
}

/// An item `stet add` wrote, and its claim.
#[derive(Debug)]
pub struct Added {
    /// The item.
    pub item: Item,
    /// Whether its handle is claimed on the remote.
    pub claim: Claim,
    /// The handle the title gave, when the item has another (it was taken).
    pub wanted: Option<String>,
}

/// The handles claimed on the remote that start with `start` (one `ls-remote`).
fn claimed(remote: &Remote<'_>, start: &str) -> Result<HashSet<String>, ReservationError> {
    let listed = remote.git(&["ls-remote", remote.name, &format!("{PREFIX}{start}*")])?;
    Ok(listed
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter_map(|(_, r)| r.strip_prefix(PREFIX))
        .map(str::to_string)
        .collect())
}

/// How claiming `handle` for `id` ended.
enum Claimed {
    Ours,
    /// Another clone claimed it first.
    Taken,
    Unreachable(ReservationError),
}

/// Claims `handle` for item `id`: a push that creates the ref, refused when it exists.
fn claim(remote: &Remote<'_>, handle: &str, id: &str) -> Claimed {
    let reference = format!("{PREFIX}{handle}");
    // A random word in the claim: two clones adding one title at the same millisecond make
    // the same id, and a claim of the same bytes would be the same commit, which a second
    // push would find already there and call a success for both.
    let mut nonce = [0u8; 8];
    if let Err(e) = getrandom::fill(&mut nonce) {
        return Claimed::Unreachable(remote.unreachable(format!("no random source: {e}")));
    }
    let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    let oid = match remote.note_commit(&format!("handle {handle} of item {id} ({nonce})")) {
        Ok(oid) => oid,
        Err(e) => return Claimed::Unreachable(e),
    };
    // An empty lease: the ref must not exist yet.
    let lease = format!("--force-with-lease={reference}:");
    match crate::git::push(
        remote.repo,
        &[&lease, remote.name, &format!("{oid}:{reference}")],
    ) {
        Ok(()) => Claimed::Ours,
        Err(crate::git::PushError::Raced { .. }) => Claimed::Taken,
        Err(crate::git::PushError::Failed(e)) => Claimed::Unreachable(
            remote.unreachable(crate::reservations::first_cause(&e.detail).to_string()),
        ),
    }
}

/// Adds an item with `text` to the working copy's queue, with a handle no item of the
/// working copy or of `remote`'s base has, claimed on `remote` (see the module's docs).
pub fn add(repo: &Path, remote_name: &str, text: &str) -> Result<Added, String> {
    let wanted = queue::handle_from_title(queue::title_of(text)?);
    let stamp = queue::stamp_now();
    let remote = Remote {
        repo,
        name: remote_name,
    };
    // Taken here: the working copy's items, and the base's as the remote has them now.
    let mut taken: HashSet<String> = queue::scan(repo)
        .0
        .iter()
        .map(|e| queue::handle_of(&e.id).to_string())
        .collect();
    let mut unreachable: Option<String> = None;
    match crate::base::fetch(repo, remote_name) {
        Ok(base) => taken.extend(
            queue::scan_at(repo, &base.commit)
                .0
                .iter()
                .map(|e| queue::handle_of(&e.id).to_string()),
        ),
        // A remote without a branch yet has no queue.
        Err(crate::base::BaseError::None { .. }) => {}
        Err(e) => unreachable = Some(e.to_string()),
    }
    let mut claims = HashSet::new();
    if unreachable.is_none() {
        match claimed(&remote, &wanted) {
            Ok(found) => claims = found,
            Err(e) => unreachable = Some(e.to_string()),
        }
    }
    for n in 1..1000 {
        let handle = queue::numbered(&wanted, n);
        if taken.contains(&handle) || claims.contains(&handle) {
            continue;
        }
        let id = format!("{stamp}-{handle}");
        let claim = match &unreachable {
            Some(why) => Claim::NotClaimed(why.clone()),
            None => match claim(&remote, &handle, &id) {
                Claimed::Ours => Claim::Claimed,
                Claimed::Taken => {
                    claims.insert(handle);
                    continue;
                }
                Claimed::Unreachable(e) => {
                    unreachable = Some(e.to_string());
                    Claim::NotClaimed(e.to_string())
                }
            },
        };
        match queue::create(repo, &id, text)? {
            Some(item) => {
                return Ok(Added {
                    wanted: (handle != wanted).then(|| wanted.clone()),
                    item,
                    claim,
                })
            }
            // Only an add on this clone at the same millisecond makes that file.
            None => {
                taken.insert(handle);
            }
        }
    }
    Err(format!(
        "every handle from {wanted} to {wanted}-999 is taken"
    ))
}

/// What a name a person gave resolves to among the queue's items.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolved<'i> {
    /// Exactly one item.
    One(&'i Item),
    /// No item.
    None,
    /// Several items (each with an exact handle, or a start of a handle or an id).
    Many(Vec<&'i Item>),
}

/// The item `given` names: an exact id; else an exact handle; else the one item whose
/// handle or id starts with it. An exact id wins over a handle so that a file named by
/// hand after another item's handle can still be named.
pub fn resolve<'i>(items: &'i [Item], given: &str) -> Resolved<'i> {
    if given.is_empty() {
        return Resolved::None;
    }
    if let Some(item) = items.iter().find(|i| i.id == given) {
        return Resolved::One(item);
    }
    let exact: Vec<&Item> = items.iter().filter(|i| i.handle == given).collect();
    let found = if exact.is_empty() {
        items
            .iter()
            .filter(|i| i.handle.starts_with(given) || i.id.starts_with(given))
            .collect()
    } else {
        exact
    };
    match found.as_slice() {
        [] => Resolved::None,
        [one] => Resolved::One(one),
        _ => Resolved::Many(found),
    }
}

/// What a name a person gave resolves to, owned: [`named`]'s answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Named {
    /// Exactly one item.
    One(Item),
    /// No item.
    None,
    /// Several items.
    Many(Vec<Item>),
}

/// The item `given` names ([`resolve`]) by the queue of `repo`'s working copy; else, when
/// no queue file names it (an item archived or removed), by the lane branches this clone
/// or `remote` has ([`crate::lanes::branch_items`]) — its work is still there to show and
/// take. Such an item has its handle (from its id) and no title, text or file.
pub fn named(repo: &Path, remote: &str, given: &str) -> Named {
    // Only the files whose name could be meant are read (a queue of 10,000 items is not
    // read whole to tell one): every item `resolve` could answer has its id or handle equal
    // to, or starting with, what was given.
    let (entries, _) = queue::scan(repo);
    let items: Vec<Item> = entries
        .iter()
        .filter(|_| !given.is_empty())
        .filter(|e| {
            let handle = queue::handle_of(&e.id);
            e.id.starts_with(given) || handle.starts_with(given)
        })
        .filter_map(|e| e.load().ok())
        .collect();
    match resolve(&items, given) {
        Resolved::One(item) => return Named::One(item.clone()),
        Resolved::Many(many) => return Named::Many(many.into_iter().cloned().collect()),
        Resolved::None => {}
    }
    let gone: Vec<Item> = crate::lanes::branch_items(repo, remote)
        .into_iter()
        .filter(|id| !items.iter().any(|i| &i.id == id))
        .map(|id| Item {
            handle: queue::handle_of(&id).to_string(),
            title: String::new(),
            text: String::new(),
            path: std::path::PathBuf::new(),
            id,
        })
        .collect();
    match resolve(&gone, given) {
        Resolved::One(item) => Named::One(item.clone()),
        Resolved::Many(many) => Named::Many(many.into_iter().cloned().collect()),
        Resolved::None => Named::None,
    }
}

/// The handles of the working copy's items under `dir`'s repository that start with
/// `start`, with their titles: the shell's candidates (no network, no remote; names only,
/// but for the titles, which are read from files).
pub fn candidates(dir: &Path, start: &str) -> Vec<(String, String)> {
    let Some(repo) = crate::config::repository_root(dir) else {
        return Vec::new();
    };
    let (items, _) = queue::read(&repo);
    items
        .into_iter()
        .filter(|i| i.handle.starts_with(start))
        .map(|i| (i.handle, i.title))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str) -> Item {
        Item {
            id: id.to_string(),
            handle: queue::handle_of(id).to_string(),
            title: String::new(),
            text: String::new(),
            path: id.into(),
        }
    }

    fn ids(r: Resolved<'_>) -> Vec<String> {
        match r {
            Resolved::One(i) => vec![i.id.clone()],
            Resolved::None => vec![],
            Resolved::Many(many) => many.iter().map(|i| format!("{}?", i.id)).collect(),
        }
    }

    #[test]
    fn an_exact_id_then_an_exact_handle_then_a_unique_start() {
        let items = [
            item("20261130-053012-123-fix-typo"),
            item("20261130-053012-456-fix-typo-readme"),
            item("20261201-101010-000-add-changelog"),
            item("fix-typo-2"),
            item("add"),
        ];
        let r = |given: &str| ids(resolve(&items, given));
        // An exact id.
        assert_eq!(
            r("20261130-053012-123-fix-typo"),
            ["20261130-053012-123-fix-typo"]
        );
        // An exact handle, though it also starts another handle.
        assert_eq!(r("fix-typo"), ["20261130-053012-123-fix-typo"]);
        // An exact id named by hand wins over the start of other handles.
        assert_eq!(r("add"), ["add"]);
        // A unique start of a handle, or of an id.
        assert_eq!(r("fix-typo-r"), ["20261130-053012-456-fix-typo-readme"]);
        assert_eq!(r("add-c"), ["20261201-101010-000-add-changelog"]);
        assert_eq!(r("20261201"), ["20261201-101010-000-add-changelog"]);
        // Ambiguous starts list every candidate.
        assert_eq!(
            r("fix"),
            [
                "20261130-053012-123-fix-typo?",
                "20261130-053012-456-fix-typo-readme?",
                "fix-typo-2?"
            ]
        );
        assert_eq!(
            r("20261130"),
            [
                "20261130-053012-123-fix-typo?",
                "20261130-053012-456-fix-typo-readme?"
            ]
        );
        assert!(r("nothing").is_empty());
        assert!(r("").is_empty());
    }

    #[test]
    fn two_items_of_one_handle_are_ambiguous_by_it() {
        // Two clones that added the same title while the remote did not answer.
        let items = [
            item("20261130-053012-123-fix-typo"),
            item("20261130-060000-000-fix-typo"),
        ];
        assert_eq!(
            ids(resolve(&items, "fix-typo")),
            [
                "20261130-053012-123-fix-typo?",
                "20261130-060000-000-fix-typo?"
            ]
        );
        assert_eq!(
            ids(resolve(&items, "20261130-06")),
            ["20261130-060000-000-fix-typo"]
        );
    }

    #[test]
    fn two_clones_adding_one_title_at_the_same_instant_never_share_a_handle() {
        let (root, bare, a) = crate::git::testing::clone_of_fresh_remote();
        let b = root.path().join("b");
        crate::git::run(
            root.path(),
            &[
                "clone",
                "--quiet",
                bare.to_str().unwrap(),
                b.to_str().unwrap(),
            ],
        )
        .unwrap();
        // Both list the claims before either pushes, often: then the later push is refused
        // by the remote and that clone takes the next handle.
        for round in 0..6 {
            let title = format!("Round {round} of the race");
            let (x, y) = std::thread::scope(|scope| {
                let x = scope.spawn(|| add(&a, "origin", &title).unwrap());
                let y = scope.spawn(|| add(&b, "origin", &title).unwrap());
                (x.join().unwrap(), y.join().unwrap())
            });
            assert_eq!((&x.claim, &y.claim), (&Claim::Claimed, &Claim::Claimed));
            let mut got = [x.item.handle, y.item.handle];
            got.sort();
            assert_eq!(
                got,
                [
                    format!("round-{round}-race"),
                    format!("round-{round}-race-2")
                ]
            );
        }
    }

    #[test]
    fn two_clones_adding_one_title_get_two_handles_and_an_unreachable_remote_claims_none() {
        let (root, _bare, a) = crate::git::testing::clone_of_fresh_remote();
        let b = root.path().join("b");
        crate::git::run(
            root.path(),
            &[
                "clone",
                "--quiet",
                _bare.to_str().unwrap(),
                b.to_str().unwrap(),
            ],
        )
        .unwrap();
        let first = add(&a, "origin", "Fix the typo in the README").unwrap();
        assert_eq!(first.item.handle, "fix-typo-readme");
        assert_eq!(first.claim, Claim::Claimed);
        assert_eq!(first.wanted, None);
        // The other clone has not pulled the item: the claim on the remote alone tells it.
        let second = add(&b, "origin", "Fix the typo in the README").unwrap();
        assert_eq!(second.item.handle, "fix-typo-readme-2");
        assert_eq!(second.claim, Claim::Claimed);
        assert_eq!(second.wanted.as_deref(), Some("fix-typo-readme"));
        let refs = crate::git::run(&a, &["ls-remote", "origin", "refs/stet/handles/*"]).unwrap();
        assert_eq!(refs.lines().count(), 2, "{refs}");
        // A claim is create-only: claiming a taken handle again is refused.
        let remote = Remote {
            repo: &a,
            name: "origin",
        };
        assert!(matches!(
            claim(&remote, "fix-typo-readme", "x"),
            Claimed::Taken
        ));
        // No remote: written all the same, not claimed, free as far as this clone knows
        // (here it is not: the first clone's item has it, and this one cannot know).
        crate::git::run(
            &b,
            &["remote", "set-url", "origin", "/nonexistent/remote.git"],
        )
        .unwrap();
        let offline = add(&b, "origin", "Fix the typo in the README").unwrap();
        assert_eq!(offline.item.handle, "fix-typo-readme");
        assert!(matches!(offline.claim, Claim::NotClaimed(_)), "{offline:?}");
        assert!(offline.item.path.is_file());
    }
}
