//! A branch before stet lands it, or a person takes it (`stet checkout`, `stet merge`):
//! it never carries a repository its base did not hold as it is. Judged on the trees, by
//! the shapes of `shape.rs`, so that a branch made by another clone, an older stet or by
//! hand is held to the same rule as a lane's commit.

use std::collections::BTreeMap;
use std::path::Path;

use crate::git::{GitError, Inert};

use super::shape::{self, Shape};

/// A repository a branch carries.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Carried {
    /// Where, in the branch's tree (empty: its top).
    pub path: String,
    /// Why git would take it for one.
    pub shape: Shape,
}

/// Every directory of a commit's tree: its tree id and the names in it.
fn directories(
    git: &Inert,
    commit: &str,
) -> Result<BTreeMap<String, (String, Vec<String>)>, GitError> {
    let top = git.run(&[
        "rev-parse",
        "--verify",
        "--end-of-options",
        &format!("{commit}^{{tree}}"),
    ])?;
    let mut dirs: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    dirs.insert(String::new(), (top.trim().to_string(), Vec::new()));
    let listing = git
        .output(&["ls-tree", "-r", "-t", "-z", "--full-tree", commit])?
        .stdout;
    for entry in listing.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8_lossy(entry);
        let Some((meta, path)) = entry.split_once('\t') else {
            continue;
        };
        let mut fields = meta.split(' ');
        let (_mode, kind, oid) = (fields.next(), fields.next(), fields.next().unwrap_or(""));
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        dirs.entry(parent.to_string())
            .or_default()
            .1
            .push(name.to_string());
        if kind == Some("tree") {
            dirs.entry(path.to_string()).or_default().0 = oid.to_string();
        }
    }
    Ok(dirs)
}

/// The repositories `branch` carries that `base` does not hold as they are (absent there,
/// or another tree): each a directory git would take for a repository, or a `.git` entry.
/// Empty: the branch may land.
pub fn check_branch(repo: &Path, base: &str, branch: &str) -> Result<Vec<Carried>, GitError> {
    let git = Inert::at(repo).with_deadline(crate::git::HOST_ONLY_DEADLINE);
    let theirs = directories(&git, branch)?;
    let ours = directories(&git, base)?;
    let mut carried = Vec::new();
    for (dir, (oid, names)) in &theirs {
        let unchanged = ours.get(dir).is_some_and(|(base_oid, _)| base_oid == oid);
        if unchanged {
            continue;
        }
        for name in names {
            if shape::is_dot_git(name.as_bytes()) {
                carried.push(Carried {
                    path: if dir.is_empty() {
                        name.clone()
                    } else {
                        format!("{dir}/{name}")
                    },
                    shape: Shape::DotGit,
                });
            }
        }
        if let Some(shape) = shape::of_names(names.iter().map(|n| n.as_bytes())) {
            carried.push(Carried {
                path: dir.clone(),
                shape,
            });
        }
    }
    Ok(carried)
}

/// Why a branch may not land or be taken, in words for a person.
pub fn carried_words(branch: &str, carried: &[Carried]) -> String {
    let listed: Vec<String> = carried
        .iter()
        .take(10)
        .map(|c| {
            format!(
                "{} ({})",
                if c.path.is_empty() {
                    "its top"
                } else {
                    &c.path
                },
                c.shape.words()
            )
        })
        .collect();
    format!(
        "{branch} carries {}: {}{}; git would take it for one wherever the branch is checked out",
        crate::printer::count(carried.len(), "git repository", "git repositories"),
        listed.join(", "),
        if carried.len() > listed.len() {
            format!(" and {} more", carried.len() - listed.len())
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::run as git;

    #[test]
    fn a_branch_carrying_a_repository_under_any_name_is_named_and_the_bases_own_is_not() {
        let (_root, _bare, work) = crate::git::testing::clone_of_fresh_remote();
        // The base's own fixture repository, as a project of git tools would have.
        let fixture = work.join("tests/fixture.git");
        std::fs::create_dir_all(fixture.join("objects")).unwrap();
        std::fs::create_dir_all(fixture.join("refs/heads")).unwrap();
        std::fs::write(fixture.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(fixture.join("objects/.keep"), "").unwrap();
        std::fs::write(fixture.join("refs/heads/.keep"), "").unwrap();
        git(&work, &["add", "."]).unwrap();
        git(&work, &["commit", "--quiet", "-m", "a fixture"]).unwrap();
        let base = git(&work, &["rev-parse", "HEAD"]).unwrap();
        git(&work, &["checkout", "--quiet", "-b", "stet/item"]).unwrap();
        std::fs::write(work.join("README"), "changed\n").unwrap();
        git(&work, &["commit", "--quiet", "-am", "work"]).unwrap();
        assert_eq!(check_branch(&work, &base, "stet/item").unwrap(), []);
        // A worktree layout under another name: HEAD and commondir among the docs.
        std::fs::create_dir_all(work.join("docs")).unwrap();
        std::fs::write(work.join("docs/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(work.join("docs/commondir"), "../tests/fixture.git\n").unwrap();
        // And the fixture changed: a config with a program in it.
        std::fs::write(fixture.join("config"), "[core]\n\tfsmonitor = touch x\n").unwrap();
        git(&work, &["add", "."]).unwrap();
        git(&work, &["commit", "--quiet", "-m", "more"]).unwrap();
        let carried = check_branch(&work, &base, "stet/item").unwrap();
        let paths: Vec<&str> = carried.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["docs", "tests/fixture.git"], "{carried:?}");
        assert!(carried_words("stet/item", &carried)
            .contains("docs (a directory laid out as a git directory"));
    }
}
