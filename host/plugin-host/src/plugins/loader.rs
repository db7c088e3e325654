//! Loading a plugin library into this process, through abi_stable.
//!
//! Each library is opened by its own path with `lib_header_from_path` and
//! `init_root_module`; `RootModule::load_from_file` is not used because it caches one
//! module per interface type and would hand back the first plugin for every later path.
//!
//! The library's reported API version picks the interface module: `abi::v1` (the
//! append-only interface of 1.2 and every later minor), or the frozen 1.0 and 1.1 modules.
//! A plugin built for this host's minor or a newer one is checked by abi_stable as usual (it
//! may have more than the host knows). One built for an older minor of the v1 line has fewer
//! methods than the host knows, which abi_stable's loader refuses by design; the host checks
//! it the other way round — every field the plugin has must be exactly what the host
//! expects there — and then talks to it through `v1`, whose appended methods have defaults
//! for what the plugin lacks. What a newer plugin needs of the host it names (`requires`);
//! a host that lacks it refuses the plugin in one line. Loaded libraries are never unloaded
//! (abi_stable leaks them by design).

use std::path::{Path, PathBuf};

use abi_stable::library::{lib_header_from_path, LibHeader, LibraryError};
use abi_stable::std_types::{RResult, RStr, RString, RVec};
use serde::{Deserialize, Serialize};
use stet_plugin_api::abi::{v1, v1_0, v1_1};
use stet_plugin_api::{
    CallOutcome, CredentialDecl, ExitStatus, HarnessContext, ImageStatus, Label, Launch,
    PluginError, PluginIdentity, PluginKind, ProbeReport, ProcessSpec, Profile, Role, RoleRequest,
    SandboxInfo, SandboxOption, SandboxSpec, TerminalSize, WallCheck, WallReport,
};

use super::manifest::Manifest;
use super::version::{api_compatible, host_api};

/// What a loaded library says about itself, as plain Rust data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Plugin name.
    pub name: String,
    /// Runtime or harness.
    pub kind: String,
    /// Plugin version.
    pub version: String,
    /// The API version the library was built against.
    pub api_version: String,
}

impl From<PluginIdentity> for Identity {
    fn from(id: PluginIdentity) -> Self {
        Identity {
            name: id.name.into_string(),
            kind: id.kind.as_str().to_string(),
            version: id.version.into_string(),
            api_version: id.api_version.into_string(),
        }
    }
}

/// Why a plugin could not be loaded. Each variant names the plugin or its file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The library file is not there.
    #[error("plugin {name}: library {} is missing", path.display())]
    LibraryMissing { name: String, path: PathBuf },
    /// The operating system's loader refused the file.
    #[error("plugin {name}: {} is not a loadable shared library ({reason})", path.display())]
    NotALibrary {
        name: String,
        path: PathBuf,
        reason: String,
    },
    /// The library loads but exports no stet root module.
    #[error("plugin {name}: {} is a shared library but not a stet plugin (it exports no stet root module)", path.display())]
    NoRootModule { name: String, path: PathBuf },
    /// The library was built for a plugin API this host cannot load.
    #[error("plugin {name} was built for plugin API {plugin_api}; this stet speaks plugin API {host_api}")]
    IncompatibleApi {
        name: String,
        plugin_api: String,
        host_api: String,
    },
    /// The library's root module does not have the layout of its API version.
    #[error(
        "plugin {name}: its interface layout does not match plugin API {plugin_api} ({summary})"
    )]
    Layout {
        name: String,
        plugin_api: String,
        summary: String,
        /// abi_stable's full report, shown with `-v`.
        report: String,
    },
    /// The library says something different about itself than its manifest.
    #[error("plugin {name}: the library says {library}, but its manifest {} says {manifest}", manifest_path.display())]
    Mismatch {
        name: String,
        manifest_path: PathBuf,
        library: String,
        manifest: String,
    },
    /// The library's root module constructor failed or panicked.
    #[error("plugin {name}: its root module failed to initialise: {reason}")]
    Init { name: String, reason: String },
    /// The library was built for a newer minor version and needs something of the host
    /// this host does not have.
    #[error("plugin {name} was built for plugin API {plugin_api} and needs `{}` of the host, which this stet (plugin API {host_api}) does not have", missing.join("`, `"))]
    NeedsHost {
        name: String,
        plugin_api: String,
        host_api: String,
        missing: Vec<String>,
    },
}

impl LoadError {
    /// What the person can do about it.
    pub fn hint(&self) -> String {
        match self {
            LoadError::LibraryMissing { .. } => {
                "reinstall the plugin, or remove its directory".to_string()
            }
            LoadError::NotALibrary { .. } | LoadError::NoRootModule { .. } => {
                "the file is damaged or is not a stet plugin: reinstall the plugin".to_string()
            }
            LoadError::IncompatibleApi { name, host_api, .. } => {
                let major = host_api.split('.').next().unwrap_or("?");
                format!("install a build of {name} for plugin API {major}.x, or a stet that speaks the plugin's API")
            }
            LoadError::Layout { .. } => {
                "rebuild the plugin against a released stet-plugin-api (run with -v for the layout report)"
                    .to_string()
            }
            LoadError::Mismatch { .. } => {
                "the manifest and the library come from different builds: reinstall the plugin"
                    .to_string()
            }
            LoadError::Init { .. } => "report this to the plugin's author".to_string(),
            LoadError::NeedsHost { name, .. } => format!(
                "upgrade stet to one that speaks the plugin's API, or install an older build of {name}"
            ),
        }
    }

    /// abi_stable's long report, for `-v`.
    pub fn report(&self) -> Option<&str> {
        match self {
            LoadError::Layout { report, .. } => Some(report),
            _ => None,
        }
    }
}

/// The root module, through the interface line the library was built for.
#[derive(Clone, Copy)]
enum Root {
    /// 1.2 and later minors.
    V1(v1::StetPlugin_Ref),
    V1_1(v1_1::StetPlugin_Ref),
    V1_0(v1_0::StetPlugin_Ref),
}

/// A plugin library loaded into this process, checked against its manifest.
pub struct Loaded {
    /// Its manifest.
    pub manifest: Manifest,
    /// What the library said about itself (equal to the manifest where they overlap).
    pub identity: Identity,
    /// The interface version used to talk to it (`1.0`, `1.1`, or the plugin's own minor
    /// of the v1 line: `1.2`, `1.3`, ...).
    pub interface: String,
    root: Root,
}

/// Loads the plugin described by `manifest` and checks it. Runs library code: the
/// library's initialisers and its identity function.
pub fn load(manifest: &Manifest) -> Result<Loaded, LoadError> {
    let name = manifest.name.clone();
    let path = manifest.library.clone();
    if !path.is_file() {
        return Err(LoadError::LibraryMissing { name, path });
    }
    if let Err(reason) = check_elf_extent(&path) {
        return Err(LoadError::NotALibrary { name, path, reason });
    }
    let header = open(&name, &path)?;

    let reported = header.version_strings().version.as_str().to_string();
    let plugin_api = semver::Version::parse(&reported).map_err(|_| LoadError::Layout {
        name: name.clone(),
        plugin_api: reported.clone(),
        summary: "its API version is not semver".to_string(),
        report: String::new(),
    })?;
    let host = host_api();
    if !api_compatible(&plugin_api, &host) {
        return Err(LoadError::IncompatibleApi {
            name,
            plugin_api: reported,
            host_api: host.to_string(),
        });
    }

    // Pick the interface module by the minor version the library was built for: the
    // current layout for this minor and newer ones (abi_stable accepts extra fields), a
    // frozen copy for older ones.
    let layout_error = |e: LibraryError| match e {
        LibraryError::AbiInstability(report) => {
            let report = report.to_string();
            LoadError::Layout {
                name: name.clone(),
                plugin_api: reported.clone(),
                summary: summarize_layout_report(&report),
                report,
            }
        }
        LibraryError::RootModule { err, .. } => LoadError::Init {
            name: name.clone(),
            reason: err.to_string(),
        },
        other => LoadError::Layout {
            name: name.clone(),
            plugin_api: reported.clone(),
            summary: first_line(&other.to_string()),
            report: other.to_string(),
        },
    };
    let (root, interface) = match plugin_api.minor {
        0 => (
            Root::V1_0(
                header
                    .init_root_module::<v1_0::StetPlugin_Ref>()
                    .map_err(layout_error)?,
            ),
            "1.0".to_string(),
        ),
        1 => (
            Root::V1_1(
                header
                    .init_root_module::<v1_1::StetPlugin_Ref>()
                    .map_err(layout_error)?,
            ),
            "1.1".to_string(),
        ),
        minor if minor >= host.minor => (
            Root::V1(
                header
                    .init_root_module::<v1::StetPlugin_Ref>()
                    .map_err(layout_error)?,
            ),
            format!("1.{minor}"),
        ),
        minor => (
            Root::V1(older_of_the_line(header).map_err(layout_error)?),
            format!("1.{minor}"),
        ),
    };

    let identity: Identity = match root {
        Root::V1(r) => r.identity()(),
        Root::V1_1(r) => r.identity()(),
        Root::V1_0(r) => r.identity()(),
    }
    .into();
    if let Root::V1(r) = root {
        let required: Vec<String> = r
            .requires()
            .map(|f| f().into_iter().map(RString::into_string).collect())
            .unwrap_or_default();
        let missing: Vec<String> = required
            .into_iter()
            .filter(|c| !super::version::HOST_CAPABILITIES.contains(&c.as_str()))
            .collect();
        if !missing.is_empty() {
            return Err(LoadError::NeedsHost {
                name,
                plugin_api: reported,
                host_api: host.to_string(),
                missing,
            });
        }
    }
    check_identity(manifest, &identity)?;
    Ok(Loaded {
        manifest: manifest.clone(),
        identity,
        interface,
        root,
    })
}

/// A plugin of the v1 line built for an older minor than this host's: every field it has
/// must be what the host expects there (abi_stable's checker, run with the plugin's layout
/// as the interface and the host's as the implementation), and then the host may use it
/// through `v1`: the fields it lacks come after the fixed prefix, where the host's accessors
/// find them missing and the appended methods' defaults answer.
fn older_of_the_line(header: &'static LibHeader) -> Result<v1::StetPlugin_Ref, LibraryError> {
    use abi_stable::library::RootModule;
    if let Some(plugin) = header.layout() {
        abi_stable::abi_stability::abi_checking::check_layout_compatibility(
            plugin,
            <v1::StetPlugin_Ref as abi_stable::StableAbi>::LAYOUT,
        )
        .map_err(|e| {
            LibraryError::AbiInstability(
                abi_stable::std_types::RBoxError::new(e).to_formatted_error(),
            )
        })?;
    } else {
        return Err(LibraryError::AbiInstability(
            abi_stable::std_types::RBoxError::new(std::io::Error::other(
                "Error:the library exports no layout to check",
            ))
            .to_formatted_error(),
        ));
    }
    let _ = <v1::StetPlugin_Ref as RootModule>::NAME;
    // SAFETY: the check above proved that every field the library has matches the host's
    // layout at the same place, and that its prefix is the host's; the fields it lacks lie
    // after the prefix, where prefix-type accessors check the library's own field count
    // before they read (the appended methods have defaults, `requires` is optional).
    #[allow(unsafe_code)]
    unsafe {
        header.init_root_module_with_unchecked_layout::<v1::StetPlugin_Ref>()
    }
}

fn open(name: &str, path: &Path) -> Result<&'static LibHeader, LoadError> {
    lib_header_from_path(path).map_err(|e| match e {
        LibraryError::OpenError { err, .. } => LoadError::NotALibrary {
            name: name.to_string(),
            path: path.to_path_buf(),
            reason: dlopen_reason(&err.to_string(), path),
        },
        LibraryError::GetSymbolError { .. } => LoadError::NoRootModule {
            name: name.to_string(),
            path: path.to_path_buf(),
        },
        other => LoadError::NotALibrary {
            name: name.to_string(),
            path: path.to_path_buf(),
            reason: first_line(&other.to_string()),
        },
    })
}

/// Refuses an ELF file whose headers describe more bytes than the file holds.
///
/// dlopen maps a truncated library and the process dies of SIGBUS when it touches the
/// missing pages; checking the extents first turns that into an error that says what is
/// wrong. Files that are not 64-bit little-endian ELF are left to dlopen to judge.
fn check_elf_extent(path: &Path) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot be opened: {e}"))?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let mut header = [0u8; 64];
    if file.read_exact(&mut header).is_err()
        || &header[..4] != b"\x7fELF"
        || header[4] != 2
        || header[5] != 1
    {
        return Ok(());
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as u64;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (phoff, shoff) = (u64_at(&header, 0x20), u64_at(&header, 0x28));
    let (phentsize, phnum) = (u16_at(&header, 0x36), u16_at(&header, 0x38));
    let (shentsize, shnum) = (u16_at(&header, 0x3A), u16_at(&header, 0x3C));
    let truncated = |needed: u64| {
        format!(
            "the file is truncated: {len} bytes, but its ELF headers describe at least {needed}"
        )
    };
    let sections_end = shoff.saturating_add(shentsize * shnum);
    let programs_end = phoff.saturating_add(phentsize * phnum);
    if sections_end > len || programs_end > len || phentsize < 40 {
        return Err(truncated(sections_end.max(programs_end)));
    }
    let mut table = vec![0u8; (phentsize * phnum) as usize];
    file.seek(SeekFrom::Start(phoff))
        .and_then(|_| file.read_exact(&mut table))
        .map_err(|e| format!("cannot be read: {e}"))?;
    for entry in table.chunks(phentsize as usize) {
        let segment_end = u64_at(entry, 8).saturating_add(u64_at(entry, 32));
        if segment_end > len {
            return Err(truncated(segment_end));
        }
    }
    Ok(())
}

/// dlerror's text repeats the path; keep what comes after it.
fn dlopen_reason(message: &str, path: &Path) -> String {
    let path = path.display().to_string();
    let tail = message
        .rsplit(&format!("{path}: "))
        .next()
        .unwrap_or(message);
    first_line(tail.trim())
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").trim().to_string()
}

/// abi_stable's layout reports run to thousands of lines; the lines that start with
/// `Error:` say what differs.
fn summarize_layout_report(report: &str) -> String {
    let errors: Vec<&str> = report
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("Error:"))
        .collect();
    let mut unique: Vec<&str> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.len() {
        0 => first_line(report),
        n if n <= 3 => unique.join("; "),
        n => format!("{}; and {} more", unique[..3].join("; "), n - 3),
    }
}

fn check_identity(manifest: &Manifest, identity: &Identity) -> Result<(), LoadError> {
    let said = format!(
        "{} {} {} (API {})",
        identity.kind, identity.name, identity.version, identity.api_version
    );
    let expected = format!(
        "{} {} {} (API {})",
        manifest.kind.as_str(),
        manifest.name,
        manifest.version,
        manifest.api
    );
    let version_matches = semver::Version::parse(&identity.version)
        .map(|v| v == manifest.version)
        .unwrap_or(false);
    let api_matches = semver::Version::parse(&identity.api_version)
        .map(|v| v == manifest.api)
        .unwrap_or(false);
    if identity.name != manifest.name
        || identity.kind != manifest.kind.as_str()
        || !version_matches
        || !api_matches
    {
        return Err(LoadError::Mismatch {
            name: manifest.name.clone(),
            manifest_path: manifest.path.clone(),
            library: said,
            manifest: expected,
        });
    }
    Ok(())
}

/// A runtime, through whichever interface version its library speaks.
pub enum RuntimeHandle {
    /// The v1 line (1.2 and later).
    V1(v1::RuntimeBox),
    /// A plugin built against 1.1.
    V1_1(v1_1::RuntimeBox),
    /// A plugin built against 1.0.
    V1_0(v1_0::RuntimeBox),
}

/// A harness, through whichever interface version its library speaks.
pub enum HarnessHandle {
    /// The v1 line (1.2 and later).
    V1(v1::HarnessBox),
    /// A plugin built against 1.1 or 1.0 (their harness interface is the same).
    V1_1(v1_1::HarnessBox),
}

/// Calls a method every version of a handle has, on whichever version it is.
macro_rules! on_any_version {
    ($handle:expr, $r:ident => $call:expr) => {
        match $handle {
            RuntimeHandle::V1($r) => $call.into(),
            RuntimeHandle::V1_1($r) => $call.into(),
            RuntimeHandle::V1_0($r) => $call.into(),
        }
    };
}

macro_rules! on_any_harness {
    ($handle:expr, $h:ident => $call:expr) => {
        match $handle {
            HarnessHandle::V1($h) => $call.into(),
            HarnessHandle::V1_1($h) => $call.into(),
        }
    };
}

impl HarnessHandle {
    /// See [`stet_plugin_api::HarnessPlugin::probe`].
    pub fn probe(&self) -> Result<ProbeReport, PluginError> {
        on_any_harness!(self, h => h.probe())
    }

    /// See [`stet_plugin_api::HarnessPlugin::profile`].
    pub fn profile(&self, context: HarnessContext) -> Result<Profile, PluginError> {
        on_any_harness!(self, h => h.profile(context))
    }

    /// See [`stet_plugin_api::HarnessPlugin::write_settings`].
    pub fn write_settings(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> Result<String, PluginError> {
        let r: Result<RString, PluginError> =
            on_any_harness!(self, h => h.write_settings(context, profile));
        r.map(RString::into_string)
    }

    /// See [`stet_plugin_api::HarnessPlugin::check_walls`].
    pub fn check_walls(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> Result<Vec<WallCheck>, PluginError> {
        let r: Result<RVec<WallCheck>, PluginError> =
            on_any_harness!(self, h => h.check_walls(context, profile));
        r.map(RVec::into_vec)
    }

    /// See [`stet_plugin_api::HarnessPlugin::launch`].
    pub fn launch(&self, request: RoleRequest) -> Result<Launch, PluginError> {
        on_any_harness!(self, h => h.launch(request))
    }

    /// See [`stet_plugin_api::HarnessPlugin::read_proof`].
    pub fn read_proof(&self, output: &[u8]) -> Result<Vec<WallCheck>, PluginError> {
        let r: Result<RVec<WallCheck>, PluginError> =
            on_any_harness!(self, h => h.read_proof(output.into()));
        r.map(RVec::into_vec)
    }

    /// See [`stet_plugin_api::HarnessPlugin::check_walls_typed`].
    pub fn check_walls_typed(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> Result<Vec<WallReport>, PluginError> {
        match self {
            HarnessHandle::V1(h) => {
                let r: Result<RVec<WallReport>, PluginError> =
                    h.check_walls_typed(context, profile).into();
                r.map(RVec::into_vec)
            }
            HarnessHandle::V1_1(_) => Ok(self
                .check_walls(context, profile)?
                .into_iter()
                .map(Into::into)
                .collect()),
        }
    }

    /// See [`stet_plugin_api::HarnessPlugin::read_proof_typed`].
    pub fn read_proof_typed(&self, output: &[u8]) -> Result<Vec<WallReport>, PluginError> {
        match self {
            HarnessHandle::V1(h) => {
                let r: Result<RVec<WallReport>, PluginError> =
                    h.read_proof_typed(output.into()).into();
                r.map(RVec::into_vec)
            }
            HarnessHandle::V1_1(_) => Ok(self
                .read_proof(output)?
                .into_iter()
                .map(Into::into)
                .collect()),
        }
    }

    /// See [`stet_plugin_api::HarnessPlugin::read_call`].
    pub fn read_call(
        &self,
        role: Role,
        output: &[u8],
        exit: ExitStatus,
    ) -> Result<CallOutcome, PluginError> {
        match self {
            HarnessHandle::V1(h) => h.read_call(role, output.into(), exit).into(),
            HarnessHandle::V1_1(h) => {
                let r: Result<stet_plugin_api::Outcome, PluginError> =
                    h.read_outcome(role, output.into(), exit).into();
                r.map(Into::into)
            }
        }
    }

    /// See [`stet_plugin_api::HarnessPlugin::credentials`]; none before 1.3.
    pub fn credentials(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> Result<Vec<CredentialDecl>, PluginError> {
        match self {
            HarnessHandle::V1(h) => {
                let r: Result<RVec<CredentialDecl>, PluginError> =
                    h.credentials(context, profile).into();
                r.map(RVec::into_vec)
            }
            HarnessHandle::V1_1(_) => Ok(Vec::new()),
        }
    }

    /// See [`stet_plugin_api::HarnessPlugin::settle_profile`]; nothing is carried before 1.3.
    pub fn settle_profile(
        &self,
        context: HarnessContext,
        profile: Profile,
        used: &Path,
    ) -> Result<Vec<String>, PluginError> {
        match self {
            HarnessHandle::V1(h) => {
                let used = used.display().to_string();
                let r: Result<RVec<RString>, PluginError> = h
                    .settle_profile(context, profile, used.as_str().into())
                    .into();
                r.map(|files| files.into_iter().map(RString::into_string).collect())
            }
            HarnessHandle::V1_1(_) => Ok(Vec::new()),
        }
    }

    /// See [`stet_plugin_api::HarnessPlugin::login_expiry`]; 0 (does not expire) before 1.4.
    pub fn login_expiry(
        &self,
        context: HarnessContext,
        profile: Profile,
    ) -> Result<u64, PluginError> {
        match self {
            HarnessHandle::V1(h) => h.login_expiry(context, profile).into(),
            HarnessHandle::V1_1(_) => Ok(0),
        }
    }

    /// See [`stet_plugin_api::HarnessPlugin::refresh_launch`]; unsupported before 1.4.
    pub fn refresh_launch(
        &self,
        context: HarnessContext,
        profile: Profile,
        work_dir: &Path,
    ) -> Result<Launch, PluginError> {
        match self {
            HarnessHandle::V1(h) => {
                let work_dir = work_dir.display().to_string();
                h.refresh_launch(context, profile, work_dir.as_str().into())
                    .into()
            }
            HarnessHandle::V1_1(_) => Err(PluginError::unsupported(
                "this harness was built for plugin API 1.1 or older, which cannot renew a login",
            )),
        }
    }

    /// See [`stet_plugin_api::HarnessPlugin::settle_refresh`]; unsupported before 1.4.
    pub fn settle_refresh(
        &self,
        context: HarnessContext,
        profile: Profile,
        work_dir: &Path,
    ) -> Result<u64, PluginError> {
        match self {
            HarnessHandle::V1(h) => {
                let work_dir = work_dir.display().to_string();
                h.settle_refresh(context, profile, work_dir.as_str().into())
                    .into()
            }
            HarnessHandle::V1_1(_) => Err(PluginError::unsupported(
                "this harness was built for plugin API 1.1 or older, which cannot renew a login",
            )),
        }
    }

    /// See [`stet_plugin_api::HarnessPlugin::login_launch`]; a harness built before 1.2
    /// has no login to offer.
    pub fn login_launch(
        &self,
        context: HarnessContext,
        profile_dir: &str,
    ) -> Result<Launch, PluginError> {
        match self {
            HarnessHandle::V1(h) => h.login_launch(context, profile_dir.into()).into(),
            HarnessHandle::V1_1(_) => Err(PluginError::unsupported(
                "this harness was built for plugin API 1.1 or older, which has no login launch",
            )
            .with_remedy("install a newer build of the harness plugin")),
        }
    }

    /// See [`stet_plugin_api::HarnessPlugin::render_transcript`]; unsupported before 1.7
    /// (the v1 line's default answers so for a plugin built before it).
    pub fn render_transcript(
        &self,
        role: stet_plugin_api::Role,
        output: &[u8],
        end: bool,
    ) -> Result<stet_plugin_api::Rendered, PluginError> {
        match self {
            HarnessHandle::V1(h) => h.render_transcript(role, output.into(), end).into(),
            HarnessHandle::V1_1(_) => Err(PluginError::unsupported(
                "this harness was built for plugin API 1.1 or older, which renders no transcript",
            )),
        }
    }
}

/// A plugin object, ready for calls.
pub enum Instance {
    /// A runtime plugin.
    Runtime(RuntimeHandle),
    /// A harness plugin.
    Harness(HarnessHandle),
}

impl Instance {
    /// Asks the plugin's backend what it can do.
    pub fn probe(&self) -> Result<ProbeReport, PluginError> {
        match self {
            Instance::Runtime(r) => r.probe(),
            Instance::Harness(h) => h.probe(),
        }
    }
}

impl Loaded {
    /// Builds the plugin object, handing it its settings as JSON.
    pub fn instantiate(&self, config_json: &str) -> Result<Instance, PluginError> {
        let config = RStr::from_str(config_json);
        let result: RResult<Instance, PluginError> = match (self.manifest.kind, self.root) {
            (PluginKind::Runtime, Root::V1(r)) => {
                r.new_runtime()(config).map(|b| Instance::Runtime(RuntimeHandle::V1(b)))
            }
            (PluginKind::Runtime, Root::V1_1(r)) => {
                r.new_runtime()(config).map(|b| Instance::Runtime(RuntimeHandle::V1_1(b)))
            }
            (PluginKind::Runtime, Root::V1_0(r)) => {
                r.new_runtime()(config).map(|b| Instance::Runtime(RuntimeHandle::V1_0(b)))
            }
            (PluginKind::Harness, Root::V1(r)) => {
                r.new_harness()(config).map(|b| Instance::Harness(HarnessHandle::V1(b)))
            }
            (PluginKind::Harness, Root::V1_1(r)) => {
                r.new_harness()(config).map(|b| Instance::Harness(HarnessHandle::V1_1(b)))
            }
            (PluginKind::Harness, Root::V1_0(r)) => {
                r.new_harness()(config).map(|b| Instance::Harness(HarnessHandle::V1_1(b)))
            }
        };
        result.into()
    }
}

impl RuntimeHandle {
    /// See [`stet_plugin_api::RuntimePlugin::probe`].
    pub fn probe(&self) -> Result<ProbeReport, PluginError> {
        on_any_version!(self, r => r.probe())
    }

    /// See [`stet_plugin_api::RuntimePlugin::create_sandbox`].
    pub fn create_sandbox(&self, spec: SandboxSpec) -> Result<SandboxInfo, PluginError> {
        on_any_version!(self, r => r.create_sandbox(spec))
    }

    /// See [`stet_plugin_api::RuntimePlugin::spawn`].
    pub fn spawn(&self, sandbox: &str, spec: ProcessSpec) -> Result<v1_1::ProcessBox, PluginError> {
        on_any_version!(self, r => r.spawn(sandbox.into(), spec))
    }

    /// See [`stet_plugin_api::RuntimePlugin::teardown`].
    pub fn teardown(&self, sandbox: &str) -> Result<(), PluginError> {
        on_any_version!(self, r => r.teardown(sandbox.into()))
    }

    /// See [`stet_plugin_api::RuntimePlugin::stop`]; a teardown before 1.5.
    pub fn stop(&self, sandbox: &str) -> Result<(), PluginError> {
        match self {
            RuntimeHandle::V1(r) => r.stop(sandbox.into()).into(),
            _ => self.teardown(sandbox),
        }
    }

    /// See [`stet_plugin_api::RuntimePlugin::limit_counters`]; none before 1.6.
    pub fn limit_counters(
        &self,
        sandbox: &str,
    ) -> Result<Option<stet_plugin_api::LimitCounters>, PluginError> {
        match self {
            RuntimeHandle::V1(r) => r
                .limit_counters(sandbox.into())
                .into_result()
                .map(Into::into),
            _ => Ok(None),
        }
    }

    /// See [`stet_plugin_api::RuntimePlugin::list_sandboxes`].
    pub fn list_sandboxes(&self, labels: Vec<Label>) -> Result<Vec<SandboxInfo>, PluginError> {
        let labels = RVec::from(labels);
        let result: Result<RVec<SandboxInfo>, PluginError> =
            on_any_version!(self, r => r.list_sandboxes(labels));
        result.map(RVec::into_vec)
    }

    /// See [`stet_plugin_api::RuntimePlugin::image_status`]. A 1.0 plugin cannot tell, so
    /// the image is taken as present and `create_sandbox` reports a missing one.
    pub fn image_status(&self, image: &str) -> Result<ImageStatus, PluginError> {
        match self {
            RuntimeHandle::V1(r) => r.image_status(image.into()).into(),
            RuntimeHandle::V1_1(r) => r.image_status(image.into()).into(),
            RuntimeHandle::V1_0(_) => Ok(ImageStatus {
                present: true,
                remedy: Default::default(),
            }),
        }
    }

    /// See [`stet_plugin_api::RuntimePlugin::spawn_terminal`]; a runtime built before 1.2
    /// cannot run terminals.
    pub fn spawn_terminal(
        &self,
        sandbox: &str,
        spec: ProcessSpec,
        size: TerminalSize,
    ) -> Result<v1::TerminalBox, PluginError> {
        match self {
            RuntimeHandle::V1(r) => r.spawn_terminal(sandbox.into(), spec, size).into(),
            _ => Err(PluginError::unsupported(
                "this runtime was built for plugin API 1.1 or older, which has no terminals",
            )
            .with_remedy("install a newer build of the runtime plugin")),
        }
    }

    /// See [`stet_plugin_api::RuntimePlugin::start`]: a sandbox with options beyond its
    /// spec. A runtime built before 1.3 makes plain sandboxes only.
    pub fn start(
        &self,
        spec: SandboxSpec,
        options: Vec<SandboxOption>,
    ) -> Result<(SandboxInfo, Option<v1_1::ProcessBox>), PluginError> {
        match self {
            RuntimeHandle::V1(r) => {
                let options: RVec<_> = options
                    .into_iter()
                    .map(stet_plugin_api::SandboxOption_NE::new)
                    .collect();
                let r: Result<v1::Started, PluginError> = r.start(spec, options).into();
                r.map(|s| (s.info, s.first.into_option()))
            }
            _ if options.is_empty() => Ok((self.create_sandbox(spec)?, None)),
            _ => Err(PluginError::unsupported(format!(
                "this runtime was built for plugin API 1.1 or older and cannot provide {}",
                options[0].name()
            ))
            .with_remedy("install a newer build of the runtime plugin")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_report_is_cut_to_its_error_lines() {
        let report = "header\n  Error:too many fields Expected: 3 Found: 2\nnoise\n  Error:too many fields Expected: 3 Found: 2\n";
        assert_eq!(
            summarize_layout_report(report),
            "Error:too many fields Expected: 3 Found: 2"
        );
    }

    #[test]
    fn dlopen_reason_drops_the_repeated_path() {
        let path = Path::new("/p/lib.so");
        assert_eq!(
            dlopen_reason(
                "Could not open library at:\n\t/p/lib.so\nbecause:\n\t/p/lib.so: invalid ELF header",
                path
            ),
            "invalid ELF header"
        );
    }
}
