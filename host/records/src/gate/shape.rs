//! What git takes for a repository, judged by shape: the names in one directory.
//!
//! Git's discovery (`setup.c`, `is_git_directory` and `read_gitfile_gently`, git 2.47)
//! takes a directory `D` for a git directory when `D/HEAD` reads as a ref (a file
//! `ref: refs/…` or an object id, or a link to `refs/…`) and the *common* directory —
//! `D` itself, or what a `D/commondir` file names — holds `objects` and `refs` that it can
//! enter (`access(X_OK)`: a directory, a link to one, even an executable file); and at each
//! level it walks up it first tries `.git` there (a directory so laid out, or a *gitfile*,
//! `gitdir: <path>`, pointing anywhere), then the level itself as a bare repository.
//! Worktrees keep `HEAD` with a `commondir` file (and a `gitdir` file pointing back).
//!
//! Stet judges by those names, never by the content or the kind of entry (a link, a
//! FIFO, a file of any bytes all count), and a little wider than git, so that nothing git
//! would take is missed:
//!
//! - any entry named `.git`, in any letter case (a case-insensitive file system — the
//!   person's Mac — makes `.GIT` the same name);
//! - a directory holding `HEAD` and any one of `objects`, `refs`, `commondir` or `gitdir`;
//! - a directory holding `objects` and `refs` (a common directory another one's
//!   `commondir` may name).

/// Why a directory is taken for a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// An entry named `.git` (a directory, a gitfile, a link, anything).
    DotGit,
    /// A directory laid out as a git directory (`HEAD` with `objects`, `refs`,
    /// `commondir` or `gitdir`).
    GitDirectory,
    /// A directory holding `objects` and `refs`: a common directory.
    CommonDirectory,
}

impl Shape {
    /// In words, for a person.
    pub fn words(self) -> &'static str {
        match self {
            Shape::DotGit => "a .git entry",
            Shape::GitDirectory => "a directory laid out as a git directory (HEAD with objects, refs, commondir or gitdir)",
            Shape::CommonDirectory => "a directory laid out as a repository's common directory (objects and refs)",
        }
    }
}

/// Whether `name` is `.git` in any letter case.
pub fn is_dot_git(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b".git")
}

/// What the directory whose entry names are `names` is taken for, if anything.
pub fn of_names<'a>(names: impl IntoIterator<Item = &'a [u8]>) -> Option<Shape> {
    let (mut head, mut objects, mut refs, mut linked) = (false, false, false, false);
    for name in names {
        match name {
            b"HEAD" => head = true,
            b"objects" => objects = true,
            b"refs" => refs = true,
            b"commondir" | b"gitdir" => linked = true,
            _ => {}
        }
    }
    if head && (objects || refs || linked) {
        Some(Shape::GitDirectory)
    } else if objects && refs {
        Some(Shape::CommonDirectory)
    } else {
        None
    }
}

/// The names whose renaming takes a directory of `shape` out of git's sight: without
/// `HEAD` it is no git directory, without `refs` no common directory.
pub fn markers(shape: Shape) -> &'static [&'static [u8]] {
    match shape {
        Shape::DotGit => &[],
        Shape::GitDirectory | Shape::CommonDirectory => &[b"HEAD", b"refs"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(names: &[&str]) -> Option<Shape> {
        of_names(names.iter().map(|n| n.as_bytes()))
    }

    #[test]
    fn shapes_are_named_as_git_finds_them_and_a_little_wider() {
        assert_eq!(
            shape(&["HEAD", "objects", "refs", "config"]),
            Some(Shape::GitDirectory)
        );
        // A worktree's git directory, and one whose common directory lies elsewhere.
        assert_eq!(shape(&["HEAD", "commondir"]), Some(Shape::GitDirectory));
        assert_eq!(
            shape(&["HEAD", "gitdir", "index"]),
            Some(Shape::GitDirectory)
        );
        // Wider than git: HEAD with only one of the two.
        assert_eq!(shape(&["HEAD", "refs"]), Some(Shape::GitDirectory));
        assert_eq!(
            shape(&["objects", "refs", "config"]),
            Some(Shape::CommonDirectory)
        );
        assert_eq!(shape(&["HEAD", "README", "src"]), None);
        assert_eq!(shape(&["objects", "src"]), None);
        for name in [".git", ".GIT", ".Git"] {
            assert!(is_dot_git(name.as_bytes()));
        }
        assert!(!is_dot_git(b".github"));
        assert!(!is_dot_git(b".gitignore"));
    }
}
