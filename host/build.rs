//! Names the commit stet is built from, for `stet --version` (`unknown` outside a git
//! checkout, as in a source tarball).

use std::path::Path;
use std::process::Command;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=STET_COMMIT={commit}");
    // A new commit changes HEAD or the branch it points at.
    let git = root.join(".git");
    println!("cargo:rerun-if-changed={}", git.join("HEAD").display());
    if let Ok(head) = std::fs::read_to_string(git.join("HEAD")) {
        if let Some(branch) = head.strip_prefix("ref: ") {
            println!(
                "cargo:rerun-if-changed={}",
                git.join(branch.trim()).display()
            );
        }
    }
    println!(
        "cargo:rerun-if-changed={}",
        git.join("packed-refs").display()
    );
}
