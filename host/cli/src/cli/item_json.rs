//! `--json` for the commands that act on one item (`rm`, `retry`): the command runs as it
//! does without it, its lines sent to standard error, and standard output carries the item
//! as it is afterwards, in the one item shape (`story::ItemJson`, docs/json.md).

use super::error::{CliError, Exit};
use crate::printer::Printer;

/// Runs `command` and, with `json`, prints the item `given` names as the remote `remote`
/// now says it is.
pub fn after(
    json: bool,
    given: &str,
    remote: &str,
    printer: Printer,
    command: impl FnOnce(Printer) -> Result<Exit, CliError>,
) -> Result<Exit, CliError> {
    if !json {
        return command(printer);
    }
    let exit = command(printer.lines_as_notes())?;
    let repo = super::queue::repo()?;
    let (items, _) = crate::queue::read(&repo);
    let item = super::queue::resolve(&items, given)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (rows, note) = crate::story::states(&repo, std::slice::from_ref(item), remote, now)?;
    if let Some(note) = note {
        printer.warn(&note);
    }
    if let Some(row) = rows.first() {
        printer.json(row);
    }
    Ok(exit)
}
