//! `plugin.toml`: what a plugin says about itself without running any of its code.
//!
//! A manifest is read and checked here and nowhere else. Every problem is reported with
//! the file, the line and the key, because the person fixing it is looking at that file.

// What this module reads comes from parties stet does not trust: nothing here may panic
// on it (issue 18).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use stet_plugin_api::PluginKind;
use toml::Spanned;

/// The file name every plugin directory holds.
pub const MANIFEST_FILE: &str = "plugin.toml";

/// A checked manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Where it was read from.
    pub path: PathBuf,
    /// Unique plugin name (`docker`).
    pub name: String,
    /// Runtime or harness.
    pub kind: PluginKind,
    /// The plugin's own version.
    pub version: semver::Version,
    /// The plugin-API version it was built for.
    pub api: semver::Version,
    /// The library, beside the manifest.
    pub library: PathBuf,
    /// One line for `stet plugins list`.
    pub description: String,
    /// Operating systems it is built for (`linux`, `macos`); empty means any.
    pub platforms: Vec<String>,
    /// What it declares it can do.
    pub capabilities: Vec<String>,
    /// The settings its `[plugins.<name>]` table may hold, with their types (`[settings]`),
    /// when it declares them: the host then checks the table before the plugin sees it and
    /// names a wrong key by its place in the person's configuration file.
    pub settings: Option<std::collections::BTreeMap<String, SettingType>>,
    /// A `[plugins.<name>]` table as the person would start it (`example`, TOML text), which
    /// `stet init` writes commented out into a new `stet.toml`: the plugin's author knows
    /// its keys; the host names no backend.
    pub example: String,
    /// A runtime's command that builds an image from a Containerfile (`image_build`, with
    /// `{tag}`, `{file}` and `{dir}` to fill in), which `stet init` prints; empty when the
    /// runtime does not say.
    pub image_build: String,
}

/// One shape a plugin setting may take, as a manifest's `[settings]` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `string`
    String,
    /// `integer`
    Integer,
    /// `number` (an integer or a float)
    Number,
    /// `boolean`
    Boolean,
    /// `strings`: an array of strings
    Strings,
    /// `table of strings`
    StringTable,
    /// `table`: any table
    Table,
    /// `any`
    Any,
}

impl Shape {
    fn parse(word: &str) -> Option<Shape> {
        Some(match word {
            "string" => Shape::String,
            "integer" => Shape::Integer,
            "number" => Shape::Number,
            "boolean" => Shape::Boolean,
            "strings" => Shape::Strings,
            "table of strings" => Shape::StringTable,
            "table" => Shape::Table,
            "any" => Shape::Any,
            _ => return None,
        })
    }

    fn words(self) -> &'static str {
        match self {
            Shape::String => "a string",
            Shape::Integer => "an integer",
            Shape::Number => "a number",
            Shape::Boolean => "a boolean",
            Shape::Strings => "an array of strings",
            Shape::StringTable => "a table of strings",
            Shape::Table => "a table",
            Shape::Any => "any value",
        }
    }

    fn accepts(self, value: &serde_json::Value) -> bool {
        use serde_json::Value;
        match self {
            Shape::String => value.is_string(),
            Shape::Integer => value.is_i64() || value.is_u64(),
            Shape::Number => value.is_number(),
            Shape::Boolean => value.is_boolean(),
            Shape::Strings => value
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_string)),
            Shape::StringTable => value
                .as_object()
                .is_some_and(|t| t.values().all(Value::is_string)),
            Shape::Table => value.is_object(),
            Shape::Any => true,
        }
    }
}

/// The type of one plugin setting: one shape, or several (`string or strings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingType(Vec<Shape>);

impl SettingType {
    /// Reads a type as a manifest writes it.
    pub fn parse(text: &str) -> Result<SettingType, String> {
        text.split(" or ")
            .map(|word| {
                Shape::parse(word.trim()).ok_or_else(|| {
                    format!(
                        "`{}` is not a setting type: use string, integer, number, boolean, strings, table of strings, table or any (joined by `or`)",
                        word.trim()
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(SettingType)
    }

    /// Whether `value` has one of the shapes.
    pub fn accepts(&self, value: &serde_json::Value) -> bool {
        self.0.iter().any(|shape| shape.accepts(value))
    }

    /// The shapes in words: "a string or an array of strings".
    pub fn words(&self) -> String {
        self.0
            .iter()
            .map(|s| s.words())
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

/// What a JSON value is, in words, for an error.
pub fn shape_of(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

/// A manifest that could not be used, with where the problem is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The manifest file.
    pub path: PathBuf,
    /// 1-based line of the problem, when known.
    pub line: Option<usize>,
    /// The key at fault, when there is one.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: Spanned<String>,
    kind: Spanned<String>,
    version: Spanned<String>,
    api: Spanned<String>,
    library: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    platforms: Vec<String>,
    #[serde(default)]
    capabilities: Vec<String>,
    #[serde(default)]
    settings: Option<std::collections::BTreeMap<String, Spanned<String>>>,
    #[serde(default)]
    example: String,
    #[serde(default)]
    image_build: String,
}

/// Reads and checks the manifest at `path`.
pub fn read(path: &Path) -> Result<Manifest, ManifestError> {
    let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
        path: path.to_path_buf(),
        line: None,
        key: None,
        message: format!("cannot be read: {e}"),
    })?;
    parse(path, &text)
}

/// Checks manifest `text` as if read from `path`.
pub fn parse(path: &Path, text: &str) -> Result<Manifest, ManifestError> {
    let error =
        |span: Option<std::ops::Range<usize>>, key: Option<&str>, message: String| ManifestError {
            path: path.to_path_buf(),
            line: span.map(|s| line_of(text, s.start)),
            key: key.map(str::to_string),
            message,
        };
    let raw: RawManifest = toml::from_str(text).map_err(|e| {
        error(
            e.span(),
            key_in_message(e.message()).as_deref(),
            e.message().to_string(),
        )
    })?;

    let name = raw.name.get_ref();
    if !is_valid_name(name) {
        return Err(error(
            Some(raw.name.span()),
            Some("name"),
            format!("`{name}` is not a plugin name: use lowercase letters, digits and `-`, starting with a letter"),
        ));
    }
    let kind = match raw.kind.get_ref().as_str() {
        "runtime" => PluginKind::Runtime,
        "harness" => PluginKind::Harness,
        other => {
            return Err(error(
                Some(raw.kind.span()),
                Some("kind"),
                format!("`{other}` is not a plugin kind: expected `runtime` or `harness`"),
            ))
        }
    };
    let semver_of = |field: &Spanned<String>, key: &str| {
        semver::Version::parse(field.get_ref()).map_err(|e| {
            error(
                Some(field.span()),
                Some(key),
                format!("`{}` is not a semver version: {e}", field.get_ref()),
            )
        })
    };
    let version = semver_of(&raw.version, "version")?;
    let api = semver_of(&raw.api, "api")?;
    let library_name = raw.library.get_ref();
    // The library must sit beside its manifest: a path would let a manifest point stet at
    // any file on the machine.
    if library_name.is_empty()
        || library_name.contains('/')
        || library_name.contains('\\')
        || library_name == "."
        || library_name == ".."
    {
        return Err(error(
            Some(raw.library.span()),
            Some("library"),
            format!("`{library_name}` must be a plain file name beside the manifest"),
        ));
    }
    let settings = match raw.settings {
        None => None,
        Some(declared) => Some(
            declared
                .into_iter()
                .map(|(key, ty)| {
                    SettingType::parse(ty.get_ref())
                        .map(|t| (key.clone(), t))
                        .map_err(|why| {
                            error(Some(ty.span()), Some(&format!("settings.{key}")), why)
                        })
                })
                .collect::<Result<_, _>>()?,
        ),
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    Ok(Manifest {
        path: path.to_path_buf(),
        name: name.clone(),
        kind,
        version,
        api,
        library: dir.join(library_name),
        description: raw.description,
        platforms: raw.platforms,
        capabilities: raw.capabilities,
        settings,
        example: raw.example,
        image_build: raw.image_build,
    })
}

impl Manifest {
    /// Whether the manifest lists this operating system (or lists none).
    pub fn runs_here(&self) -> bool {
        self.platforms.is_empty() || self.platforms.iter().any(|p| p == std::env::consts::OS)
    }
}

fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= 64
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .matches('\n')
        .count()
        .saturating_add(1)
}

/// serde names the key in its messages (``unknown field `x` ``, ``missing field `x` ``).
fn key_in_message(message: &str) -> Option<String> {
    let (_, rest) = message.split_once('`')?;
    let (key, _) = rest.split_once('`')?;
    Some(key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "docker"
kind = "runtime"
version = "0.1.0"
api = "1.1.0"
library = "libstet_plugin_docker.so"
platforms = ["linux"]
"#;

    fn parse_str(text: &str) -> Result<Manifest, ManifestError> {
        parse(Path::new("/p/docker/plugin.toml"), text)
    }

    #[test]
    fn reads_a_good_manifest() {
        let m = parse_str(GOOD).unwrap();
        assert_eq!(m.name, "docker");
        assert_eq!(m.kind, PluginKind::Runtime);
        assert_eq!(
            m.library,
            PathBuf::from("/p/docker/libstet_plugin_docker.so")
        );
    }

    #[test]
    fn declared_settings_are_typed_and_a_bad_type_word_is_named() {
        let m = parse_str(&format!(
            "{GOOD}[settings]\nhost = \"string\"\ntimeout = \"number or string\"\nenv = \"table of strings\"\n"
        ))
        .unwrap();
        let declared = m.settings.unwrap();
        assert!(declared["timeout"].accepts(&serde_json::json!(1.5)));
        assert!(declared["timeout"].accepts(&serde_json::json!("5s")));
        assert!(!declared["host"].accepts(&serde_json::json!(5)));
        assert!(declared["env"].accepts(&serde_json::json!({"A": "b"})));
        assert!(!declared["env"].accepts(&serde_json::json!({"A": 1})));
        assert_eq!(declared["timeout"].words(), "a number or a string");
        let err = parse_str(&format!("{GOOD}[settings]\nhost = \"text\"\n")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("settings.host"));
        assert_eq!(err.line, Some(9));
        assert!(
            err.message.contains("`text` is not a setting type"),
            "{err}"
        );
        // A manifest without `[settings]` leaves its table to the plugin.
        assert!(parse_str(GOOD).unwrap().settings.is_none());
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let err = parse_str(&format!("{GOOD}colour = \"red\"\n")).unwrap_err();
        assert_eq!(err.line, Some(8));
        assert_eq!(err.key.as_deref(), Some("colour"));
    }

    #[test]
    fn bad_kind_names_line_and_key() {
        let err = parse_str(&GOOD.replace("\"runtime\"", "\"engine\"")).unwrap_err();
        assert_eq!((err.line, err.key.as_deref()), (Some(3), Some("kind")));
        assert!(err.message.contains("`engine`"));
    }

    #[test]
    fn syntax_error_names_the_line() {
        let err = parse_str("name = \"docker\"\nkind = runtime\n").unwrap_err();
        assert_eq!(err.line, Some(2));
    }

    #[test]
    fn library_must_be_beside_the_manifest() {
        let err =
            parse_str(&GOOD.replace("libstet_plugin_docker.so", "../../usr/lib/x.so")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("library"));
    }

    #[test]
    fn missing_key_is_named() {
        let err = parse_str("name = \"docker\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("kind"));
    }
}
