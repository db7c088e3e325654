//! `stet board`: see [`crate::board`].

use super::error::CliError;
use super::{BoardArgs, Exit};
use crate::printer::Printer;

pub fn run(
    args: &BoardArgs,
    plugins_dirs: &[std::path::PathBuf],
    printer: Printer,
) -> Result<Exit, CliError> {
    let repo = super::queue::repo()?;
    crate::board::serve(
        crate::board::Options {
            repo,
            remote: args.remote.clone(),
            port: args.port.unwrap_or(0),
            open: args.open,
            plugins_dirs: plugins_dirs.to_vec(),
        },
        printer,
    )?;
    Ok(Exit::Success)
}
