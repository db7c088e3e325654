//! The export macro and the hidden helpers it expands to.

/// Exports a plugin's root module from a `cdylib` crate.
///
/// ```text
/// stet_plugin_api::export_plugin!(runtime, name = "docker", version = env!("CARGO_PKG_VERSION"), new = DockerRuntime::from_config);
/// stet_plugin_api::export_plugin!(harness, name = "claude", version = env!("CARGO_PKG_VERSION"), new = ClaudeHarness::from_config);
/// ```
///
/// `new` is a `fn(&str) -> Result<T, PluginError>` receiving the plugin's settings table as
/// JSON (`{}` when the person configured nothing), where `T` implements
/// [`RuntimePlugin`](crate::RuntimePlugin) or [`HarnessPlugin`](crate::HarnessPlugin).
/// `name` and `version` must equal the `name` and `version` of the plugin's `plugin.toml`:
/// the host refuses a library that says otherwise.
///
/// A plugin that needs something of the host beyond its API version (see
/// [`host_capability`](crate::host_capability)) names it last:
/// `export_plugin!(runtime, name = "x", version = "0.1.0", new = X::new, requires = [stet_plugin_api::host_capability::SANDBOX_OPTIONS])`.
/// A host without it refuses the plugin, naming what it lacks.
///
/// Every function the macro exports, and every method of the objects it hands out, catches
/// panics on the plugin's side of the boundary: a panic reaches the host as an error with
/// code [`PANICKED`](crate::ErrorCode::PANICKED) instead of ending the host process. Build
/// plugins with the default `panic = "unwind"`; with `panic = "abort"` nothing can be caught.
#[macro_export]
macro_rules! export_plugin {
    ($kind:ident, name = $name:expr, version = $version:expr, new = $new:expr $(,)?) => {
        $crate::export_plugin!($kind, name = $name, version = $version, new = $new, requires = []);
    };
    (runtime, name = $name:expr, version = $version:expr, new = $new:expr, requires = [$($required:expr),* $(,)?] $(,)?) => {
        extern "C" fn __stet_identity() -> $crate::PluginIdentity {
            $crate::__private::identity(
                $name,
                $crate::PluginKind::Runtime,
                $version,
                $crate::API_VERSION,
            )
        }
        extern "C" fn __stet_new_runtime(
            config: $crate::RStr<'_>,
        ) -> $crate::RResult<$crate::abi::v1::RuntimeBox, $crate::PluginError> {
            $crate::__private::new_runtime(config, $new)
        }
        extern "C" fn __stet_new_harness(
            _config: $crate::RStr<'_>,
        ) -> $crate::RResult<$crate::abi::v1::HarnessBox, $crate::PluginError> {
            $crate::__private::wrong_kind($name, $crate::PluginKind::Runtime)
        }
        extern "C" fn __stet_requires() -> $crate::RVec<$crate::RString> {
            $crate::__private::requires(&[$($required),*])
        }
        $crate::__export_root!(
            v1,
            __stet_identity,
            __stet_new_runtime,
            __stet_new_harness,
            requires = __stet_requires
        );
    };
    (harness, name = $name:expr, version = $version:expr, new = $new:expr, requires = [$($required:expr),* $(,)?] $(,)?) => {
        extern "C" fn __stet_identity() -> $crate::PluginIdentity {
            $crate::__private::identity(
                $name,
                $crate::PluginKind::Harness,
                $version,
                $crate::API_VERSION,
            )
        }
        extern "C" fn __stet_new_runtime(
            _config: $crate::RStr<'_>,
        ) -> $crate::RResult<$crate::abi::v1::RuntimeBox, $crate::PluginError> {
            $crate::__private::wrong_kind($name, $crate::PluginKind::Harness)
        }
        extern "C" fn __stet_new_harness(
            config: $crate::RStr<'_>,
        ) -> $crate::RResult<$crate::abi::v1::HarnessBox, $crate::PluginError> {
            $crate::__private::new_harness(config, $new)
        }
        extern "C" fn __stet_requires() -> $crate::RVec<$crate::RString> {
            $crate::__private::requires(&[$($required),*])
        }
        $crate::__export_root!(
            v1,
            __stet_identity,
            __stet_new_runtime,
            __stet_new_harness,
            requires = __stet_requires
        );
    };
}

/// Exports a runtime plugin exactly as an older stet-plugin-api did: the frozen root
/// module of that version (`v1_0`, `v1_1` or `v1_2`), reporting that API version. For
/// compatibility tests of hosts only; new plugins use [`export_plugin!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __export_frozen_runtime_plugin {
    (abi = $abi:ident, name = $name:expr, version = $version:expr, new = $new:expr $(,)?) => {
        extern "C" fn __stet_identity() -> $crate::PluginIdentity {
            $crate::__private::identity(
                $name,
                $crate::PluginKind::Runtime,
                $version,
                $crate::abi::$abi::VERSION,
            )
        }
        extern "C" fn __stet_new_runtime(
            config: $crate::RStr<'_>,
        ) -> $crate::RResult<$crate::abi::$abi::RuntimeBox, $crate::PluginError> {
            $crate::__private::$abi::new_runtime(config, $new)
        }
        extern "C" fn __stet_new_harness(
            _config: $crate::RStr<'_>,
        ) -> $crate::RResult<$crate::abi::$abi::HarnessBox, $crate::PluginError> {
            $crate::__private::wrong_kind($name, $crate::PluginKind::Runtime)
        }
        $crate::__export_root!(
            $abi,
            __stet_identity,
            __stet_new_runtime,
            __stet_new_harness
        );
    };
}

/// Writes the library header abi_stable's loader looks for. This is what
/// `#[abi_stable::export_root_module]` expands to, spelled with paths through this crate so
/// that plugin crates need no direct dependency on abi_stable. A unit test checks that the
/// symbol name still matches abi_stable's.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_root {
    ($abi:ident, $identity:ident, $new_runtime:ident, $new_harness:ident, requires = $requires:ident) => {
        $crate::__export_root!(@header $abi, $crate::abi::$abi::StetPlugin {
            identity: $identity,
            new_runtime: $new_runtime,
            new_harness: $new_harness,
            requires: $requires,
        });
    };
    ($abi:ident, $identity:ident, $new_runtime:ident, $new_harness:ident) => {
        $crate::__export_root!(@header $abi, $crate::abi::$abi::StetPlugin {
            identity: $identity,
            new_runtime: $new_runtime,
            new_harness: $new_harness,
        });
    };
    (@header $abi:ident, $module:expr) => {
        #[unsafe(no_mangle)]
        pub static _1as_0lib_1header_0root_bmodule_bloader:
            $crate::__private::abi_stable::library::LibHeader = {
            fn root() -> $crate::abi::$abi::StetPlugin_Ref {
                use $crate::__private::abi_stable::prefix_type::PrefixTypeTrait as _;
                $module.leak_into_prefix()
            }
            extern "C" fn erased() -> $crate::__private::abi_stable::library::RootModuleResult {
                $crate::__private::abi_stable::library::__call_root_module_loader(root)
            }
            unsafe {
                $crate::__private::abi_stable::library::LibHeader::from_constructor::<
                    $crate::abi::$abi::StetPlugin_Ref,
                >(
                    erased,
                    $crate::__private::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

#[doc(hidden)]
pub mod __private {
    pub use abi_stable;

    use abi_stable::{
        sabi_trait::TD_Opaque,
        std_types::{RResult, RStr},
    };

    use crate::abi::v1;
    use crate::sdk::{guard, HarnessAdapter, RuntimeAdapter};
    use crate::{HarnessPlugin, PluginError, PluginIdentity, PluginKind, RuntimePlugin};

    pub fn identity(name: &str, kind: PluginKind, version: &str, api: &str) -> PluginIdentity {
        PluginIdentity {
            name: name.into(),
            kind,
            version: version.into(),
            api_version: api.into(),
        }
    }

    pub fn new_runtime<T: RuntimePlugin>(
        config: RStr<'_>,
        new: fn(&str) -> Result<T, PluginError>,
    ) -> RResult<v1::RuntimeBox, PluginError> {
        guard("new_runtime", || {
            new(config.as_str())
                .map(|runtime| v1::Runtime_TO::from_value(RuntimeAdapter(runtime), TD_Opaque))
        })
    }

    pub fn requires(names: &[&str]) -> abi_stable::std_types::RVec<abi_stable::std_types::RString> {
        names.iter().map(|n| (*n).into()).collect()
    }

    /// Constructors through the frozen interfaces, for compatibility fixtures.
    macro_rules! frozen_constructor {
        ($abi:ident) => {
            pub mod $abi {
                use abi_stable::{
                    sabi_trait::TD_Opaque,
                    std_types::{RResult, RStr},
                };

                use crate::sdk::{guard, RuntimeAdapter};
                use crate::{PluginError, RuntimePlugin};

                pub fn new_runtime<T: RuntimePlugin>(
                    config: RStr<'_>,
                    new: fn(&str) -> Result<T, PluginError>,
                ) -> RResult<crate::abi::$abi::RuntimeBox, PluginError> {
                    guard("new_runtime", || {
                        new(config.as_str()).map(|runtime| {
                            crate::abi::$abi::Runtime_TO::from_value(
                                RuntimeAdapter(runtime),
                                TD_Opaque,
                            )
                        })
                    })
                }
            }
        };
    }
    frozen_constructor!(v1_0);
    frozen_constructor!(v1_1);
    frozen_constructor!(v1_2);

    pub fn new_harness<T: HarnessPlugin>(
        config: RStr<'_>,
        new: fn(&str) -> Result<T, PluginError>,
    ) -> RResult<v1::HarnessBox, PluginError> {
        guard("new_harness", || {
            new(config.as_str())
                .map(|harness| v1::Harness_TO::from_value(HarnessAdapter(harness), TD_Opaque))
        })
    }

    /// The constructor of the kind a plugin is not: [`UNSUPPORTED`](crate::ErrorCode::UNSUPPORTED),
    /// as the root module's documentation says.
    pub fn wrong_kind<T>(name: &str, actual: PluginKind) -> RResult<T, PluginError> {
        RResult::RErr(PluginError::unsupported(format!(
            "plugin {name} is a {} plugin and cannot be used as another kind",
            actual.as_str()
        )))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn exported_symbol_matches_abi_stable_loader_name() {
        assert_eq!(
            abi_stable::library::ROOT_MODULE_LOADER_NAME,
            "_1as_0lib_1header_0root_bmodule_bloader"
        );
    }
}
