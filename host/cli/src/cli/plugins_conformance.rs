//! `stet plugins conformance NAME`: the runtime conformance kit against an installed
//! runtime plugin, loaded as a drive would load it.

use serde::Serialize;
use stet_plugin_api::conformance::{self, Options};
use stet_plugin_api::PluginKind;

use super::error::{CliError, Exit};
use crate::plugins::survey;
use crate::printer::Printer;
use crate::sandbox::{self, Conformance};
use crate::settings::Settings;

use super::ConformanceArgs;

#[derive(Serialize)]
struct CheckJson {
    name: &'static str,
    passed: bool,
    detail: String,
    elapsed_ms: u64,
}

pub fn run(
    settings: &Settings,
    args: &ConformanceArgs,
    printer: Printer,
) -> Result<Exit, CliError> {
    let survey = survey::survey(&settings.plugins, |f| f.display_name() == args.name);
    let Some(probed) = survey.probed.first() else {
        let why = survey
            .candidates
            .first()
            .and_then(|c| c.result.as_ref().err().map(|f| f.summary()))
            .unwrap_or_else(|| "it is not installed".to_string());
        return Err(CliError::new(
            Exit::Unusable,
            format!("plugin {} cannot be tested", args.name),
        )
        .caused_by(why)
        .hint("see `stet plugins list` and `stet plugins probe`"));
    };
    if probed.manifest.kind != PluginKind::Runtime {
        return Err(CliError::usage(format!(
            "plugin {} is a {} plugin; the conformance kit tests runtimes",
            args.name,
            probed.manifest.kind.as_str()
        )));
    }
    match &probed.result {
        Ok(p) if p.available => {}
        Ok(p) => {
            return Err(CliError::new(
                Exit::Unusable,
                format!("runtime {} is unavailable", args.name),
            )
            .caused_by(p.reason.clone())
            .hint(p.remedy.clone()))
        }
        Err(f) => {
            return Err(CliError::new(
                Exit::Unusable,
                format!("runtime {} failed its probe", args.name),
            )
            .caused_by(f.summary())
            .hint(f.hint()))
        }
    }
    let runtime = sandbox::open_probed(settings, probed, Default::default())?;
    let scratch = crate::sandbox::leftovers::temp_dir("stet-conformance-")
        .map_err(|e| CliError::failure(format!("cannot make a scratch directory: {e}")))?;
    let image = settings.image.clone();
    let status = runtime
        .handle
        .image_status(&image)
        .map_err(|e| sandbox::plugin_error(&runtime.name, "could not look up the image", &e))?;
    if !status.present {
        return Err(CliError::new(
            Exit::Unusable,
            format!("image {image} is not available to {}", runtime.name),
        )
        .caused_by(status.remedy.to_string())
        .hint("build stet's lane image with scripts/build-image.sh, or pass --image"));
    }
    let checks = conformance::run(
        &Conformance(&runtime.handle),
        &Options::new(image, scratch.path()),
    );
    let passed = checks.iter().filter(|c| c.passed).count();
    if args.json {
        #[derive(serde::Serialize)]
        struct Checks<T> {
            checks: Vec<T>,
        }
        printer.json(&Checks {
            checks: checks
                .iter()
                .map(|c| CheckJson {
                    name: c.name,
                    passed: c.passed,
                    detail: c.detail.clone(),
                    elapsed_ms: c.elapsed.as_millis() as u64,
                })
                .collect::<Vec<_>>(),
        });
    } else {
        let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        printer.out(&format!(
            "conformance of {} {} ({}):",
            runtime.name, runtime.version, settings.image
        ));
        for c in &checks {
            printer.out(&format!(
                "  {}  {:<width$}  {:>6} ms  {}",
                if c.passed { "pass" } else { "FAIL" },
                c.name,
                c.elapsed.as_millis(),
                c.detail
            ));
        }
        printer.out(&format!(
            "{passed} passed, {} failed",
            checks.len() - passed
        ));
    }
    Ok(if passed == checks.len() {
        Exit::Success
    } else {
        Exit::Failure
    })
}
