//! The `stet` binary: the command line is `stet_cli`'s; this package alone carries the
//! commit it was built from (its build script), so a new commit rebuilds this file only.

fn main() -> std::process::ExitCode {
    stet_cli::cli::main(env!("STET_COMMIT"))
}
