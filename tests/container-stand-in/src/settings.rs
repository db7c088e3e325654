//! The stand-in's switches. They come from `stand-in.toml` in the directory of the
//! executable, never from the environment: stet runs the CLI with an environment built from
//! scratch.

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Shape {
    #[serde(rename = "1.x")]
    V1,
    #[serde(rename = "0.x")]
    V0,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Service {
    Running,
    Down,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorFormSetting {
    Message,
    Code,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    shape: Option<Shape>,
    version: Option<String>,
    error_form: Option<ErrorFormSetting>,
    service: Option<Service>,
    hang: Option<Vec<String>>,
    state_dir: Option<PathBuf>,
    docker: Option<PathBuf>,
    start_delay_ms: Option<u64>,
    missing_images: Option<Vec<String>>,
    json_ignores_all: Option<bool>,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub shape: Shape,
    pub version: String,
    pub error_form: crate::errors::ErrorForm,
    /// The service state before any `system start|stop` (those are kept in the state dir).
    pub service: Service,
    /// Subcommands that hang forever once their arguments are parsed ("exec",
    /// "system status", "image pull", "--version", …).
    pub hang: Vec<String>,
    pub state_dir: PathBuf,
    pub docker: PathBuf,
    /// Added before a container starts (`run`, `start`), like a VM boot.
    pub start_delay_ms: u64,
    /// Image references treated as absent even when Docker has them.
    pub missing_images: Vec<String>,
    /// container ≤ 0.9: `list --format json` ignored the `--all` filter.
    pub json_ignores_all: bool,
    /// The directory of the executable (install root is its parent).
    pub exe_dir: PathBuf,
}

pub const SETTINGS_FILE: &str = "stand-in.toml";

impl Settings {
    pub fn load() -> Result<Settings, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
        let exe_dir = exe
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let path = exe_dir.join(SETTINGS_FILE);
        let file: File = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::default(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let shape = file.shape.unwrap_or(Shape::V1);
        let version = file.version.unwrap_or_else(|| match shape {
            Shape::V1 => "1.2.2".into(),
            Shape::V0 => "0.12.3".into(),
        });
        let error_form = match file.error_form {
            Some(ErrorFormSetting::Message) => crate::errors::ErrorForm::Message,
            Some(ErrorFormSetting::Code) => crate::errors::ErrorForm::Code,
            None => match shape {
                Shape::V1 => crate::errors::ErrorForm::Message,
                Shape::V0 => crate::errors::ErrorForm::Code,
            },
        };
        let state_dir = match file.state_dir {
            Some(p) if p.is_absolute() => p,
            Some(p) => exe_dir.join(p),
            None => exe_dir.join("state"),
        };
        let docker = file.docker.unwrap_or_else(find_docker);
        Ok(Settings {
            shape,
            version,
            error_form,
            service: file.service.unwrap_or(Service::Running),
            hang: file.hang.unwrap_or_default(),
            state_dir,
            docker,
            start_delay_ms: file.start_delay_ms.unwrap_or(0),
            missing_images: file.missing_images.unwrap_or_default(),
            json_ignores_all: file.json_ignores_all.unwrap_or(false),
            exe_dir,
        })
    }

    pub fn v1(&self) -> bool {
        self.shape == Shape::V1
    }
}

fn find_docker() -> PathBuf {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("docker");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    for c in ["/usr/local/bin/docker", "/usr/bin/docker"] {
        if Path::new(c).is_file() {
            return PathBuf::from(c);
        }
    }
    PathBuf::from("docker")
}
