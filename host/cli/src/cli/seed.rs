//! `stet seed`: the setup's seed for the base, built now when it is missing
//! (`crate::setup`), so that a drive's first lane does not wait for it.

use super::error::{CliError, Exit};
use super::SeedArgs;
use crate::printer::Printer;
use crate::settings::Settings;

pub fn run(settings: &Settings, args: &SeedArgs, printer: Printer) -> Result<Exit, CliError> {
    let repo = super::queue::repo()?;
    if settings.setup.is_none() {
        let untrusted = settings
            .repository_config
            .as_ref()
            .is_some_and(|r| r.ignored.iter().any(|i| i == "[lane] setup"));
        let error = CliError::usage("there is no setup to seed lanes with");
        return Err(if untrusted {
            error.hint("stet.toml's [lane] setup applies once you trust the file: read it, then run stet trust")
        } else {
            error.hint("name one in stet.toml: [lane] setup = [\"...\"] and setup_outputs = [\"...\"] (docs/configuration.md)")
        });
    }
    let base = crate::base::fetch(&repo, &args.remote).map_err(|e| {
        CliError::new(Exit::Unusable, "there is no base to run the setup on")
            .caused_by(e.to_string())
            .hint(format!(
                "push the branch lanes start from (git push -u {} HEAD), and check the remote answers",
                args.remote
            ))
    })?;
    let runtime = crate::sandbox::open_runtime(settings)?;
    let run = format!("seed-{}", crate::timestamp::now_ms());
    let json = args.json;
    // The setup's output on stderr as it comes: a person sees it work.
    let mut echo = crate::setup::echo_to_stderr(!json);
    let limit = args.limit.unwrap_or(crate::setup::DEFAULT_LIMIT);
    let seeded = crate::sandbox::with_reaper(&runtime, |_| {
        crate::setup::ensure(
            &repo,
            settings,
            &runtime,
            &base.commit,
            &run,
            limit,
            &mut echo,
        )
    })?
    .ok_or_else(|| CliError::failure("the setup went away while it was read"))?;
    if json {
        #[derive(serde::Serialize)]
        struct Json<'a> {
            schema: &'static str,
            built: bool,
            seed: &'a crate::seeds::Seed,
            base: &'a str,
            log: Option<String>,
            receipt: Option<&'a str>,
            refused: Vec<serde_json::Value>,
        }
        printer.json(&Json {
            schema: "stet.seed/1",
            built: seeded.built,
            seed: &seeded.seed,
            base: &base.name,
            log: seeded.log.as_ref().map(|l| l.display().to_string()),
            receipt: seeded.receipt.as_deref(),
            refused: seeded
                .refused
                .iter()
                .map(|(target, count)| serde_json::json!({"target": target, "count": count}))
                .collect(),
        });
        return Ok(Exit::Success);
    }
    let seed = &seeded.seed;
    let what = format!(
        "{} ({}, {} entries)",
        seed.outputs.join(", "),
        crate::printer::size(seed.bytes),
        seed.entries
    );
    printer.out(&if seeded.built {
        format!(
            "seed {} built on {} in {:.1} s: {what}; every lane starts from it",
            seed.key,
            base.name,
            seed.took_ms as f64 / 1000.0
        )
    } else {
        format!(
            "seed {} for {} is ready (built {}): {what}",
            seed.key,
            base.name,
            crate::timestamp::utc((seed.built_unix_ms / 1000) as i64)
        )
    });
    for (target, count) in &seeded.refused {
        printer.warn(&format!(
            "stet's proxy refused the setup {target} ({count}×); [lane] setup_network lists what it may reach"
        ));
    }
    Ok(Exit::Success)
}
