//! `stet --help`: the commands in groups, by what a person is doing (queueing work,
//! driving it, looking at it, stepping into a lane, setting up, plugins), each group with an
//! example, instead of clap's one list in the order the commands were written.
//!
//! The groups name commands by their clap names; a unit test checks that every visible
//! command is in exactly one group, so a new command cannot go unlisted.

use clap::CommandFactory;

/// Each group: its heading, its commands (in the order a person meets them), an example.
const GROUPS: &[(&str, &[&str], &str)] = &[
    (
        "Queue work",
        &["add", "queue", "rm", "retry", "clean"],
        "stet add 'Fix the typo in the README' && git add .stet && git commit -m 'queue: typo' && git push",
    ),
    (
        "Drive",
        &["drive", "land", "doctor", "seed", "walls", "ask", "run", "gc"],
        "stet doctor && stet drive --jobs 2",
    ),
    (
        "Inspect",
        &["status", "show", "log", "receipts", "board"],
        "stet show fix-typo-readme",
    ),
    (
        "Into a lane",
        &["shell", "diff", "checkout", "merge"],
        "stet diff fix-typo-readme && stet merge fix-typo-readme",
    ),
    (
        "Set up",
        &["init", "trust", "profile", "completions"],
        "stet init && stet profile login",
    ),
    ("Plugins", &["plugins"], "stet plugins probe"),
];

/// The command line as clap parses it, with the grouped command list as its help.
pub fn command() -> clap::Command {
    let command = super::Cli::command();
    let listing = grouped(&command);
    command.help_template(format!(
        "{{before-help}}{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{listing}\n\
         {bold}Options:{bold:#}\n{{options}}{{after-help}}",
        bold = anstyle::Style::new().bold().underline(),
    ))
}

/// The groups as the help shows them: a heading, a line per command (the start of its
/// summary, up to its first colon, stop or parenthesis), the group's example.
fn grouped(command: &clap::Command) -> String {
    let heading = anstyle::Style::new().bold().underline();
    let name_style = anstyle::Style::new().bold();
    let dim = anstyle::Style::new().dimmed();
    let width = GROUPS
        .iter()
        .flat_map(|(_, names, _)| names.iter())
        .map(|n| n.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (title, names, example) in GROUPS {
        out.push_str(&format!("{heading}{title}:{heading:#}\n"));
        for name in *names {
            let about = command
                .find_subcommand(name)
                .and_then(|c| c.get_about())
                .map(|a| short(&a.to_string()))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {name_style}{name:<width$}{name_style:#}  {about}\n"
            ));
        }
        out.push_str(&format!("  {dim}e.g. {example}{dim:#}\n\n"));
    }
    out.push_str(
        "`stet help COMMAND` or `stet COMMAND --help` says more of each; docs/cli.md has them all.\n",
    );
    out
}

/// A summary's start: up to its first `: `, `. `, ` (` or `, e.g.`.
fn short(about: &str) -> String {
    let end = [": ", ". ", " (", ", e.g."]
        .iter()
        .filter_map(|cut| about.find(cut))
        .min()
        .unwrap_or(about.len());
    about[..end].trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_command_is_in_exactly_one_group() {
        let command = super::super::Cli::command();
        let visible: Vec<&str> = command
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name())
            .collect();
        for name in &visible {
            let groups: Vec<&str> = GROUPS
                .iter()
                .filter(|(_, names, _)| names.contains(name))
                .map(|(title, ..)| *title)
                .collect();
            assert_eq!(groups.len(), 1, "`{name}` is in groups {groups:?}");
        }
        for (title, names, _) in GROUPS {
            for name in *names {
                assert!(
                    visible.contains(name),
                    "{title} names `{name}`, not a visible command"
                );
            }
        }
    }

    #[test]
    fn a_summary_is_cut_at_its_first_explanation() {
        assert_eq!(
            short("Drain the queue, unattended: reserve each item"),
            "Drain the queue, unattended"
        );
        assert_eq!(
            short("Add a work item to the queue (`.stet/queue/`)"),
            "Add a work item to the queue"
        );
        assert_eq!(short("Cancel an item. Then"), "Cancel an item");
        assert_eq!(
            short("Remove sandboxes left behind"),
            "Remove sandboxes left behind"
        );
    }
}

/// The markdown command reference, generated from the CLI definition.
pub fn reference() -> String {
    let mut command = command();
    command.build();
    let mut out = String::from(
        "# `stet` command reference\n\n\
         Generated from the CLI definition by `cargo xtask docs`; a test fails when it is stale.\n",
    );
    render(&mut command, "stet", &mut out);
    out
}

fn render(command: &mut clap::Command, path: &str, out: &mut String) {
    if command.is_hide_set() {
        return;
    }
    let help = command.render_long_help().to_string();
    out.push_str(&format!(
        "\n## `{path}`\n\n```text\n{}\n```\n",
        help.trim_end()
    ));
    let names: Vec<String> = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        let sub = command.find_subcommand_mut(&name).expect("listed above");
        render(sub, &format!("{path} {name}"), out);
    }
}

#[cfg(test)]
mod reference_tests {
    /// `docs/cli.md` is the reference as the CLI defines it; `cargo xtask docs` writes it
    /// (this test, with `STET_WRITE_DOCS=1`).
    #[test]
    fn the_command_reference_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
        let reference = super::reference();
        if std::env::var_os("STET_WRITE_DOCS").is_some() {
            std::fs::write(&path, &reference).unwrap();
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == reference,
            "docs/cli.md is stale: run `cargo xtask docs` and commit the result"
        );
    }
}
