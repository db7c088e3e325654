//! The plugin-API version this host speaks, and which plugin versions it can load.

/// The plugin-API version this host was built with.
pub fn host_api() -> semver::Version {
    semver::Version::parse(stet_plugin_api::API_VERSION).expect("API_VERSION is semver")
}

/// What this host offers plugins beyond its API version (`requires` in a plugin's root
/// module): every name of [`stet_plugin_api::host_capability`] it implements.
pub const HOST_CAPABILITIES: &[&str] = &[
    stet_plugin_api::host_capability::TYPED_WALLS,
    stet_plugin_api::host_capability::TYPED_OUTCOMES,
    stet_plugin_api::host_capability::PROFILE_COPIES,
    stet_plugin_api::host_capability::SANDBOX_OPTIONS,
];

/// Whether a plugin built for `plugin` can be loaded by a host speaking `host`.
///
/// Same major version (for 0.x, same minor): a plugin built for 1.0 or 1.1 loads through
/// their frozen interface modules, one built for an older minor of the v1 line (1.2 on)
/// through `v1` with its defaults, and one built for a newer minor because abi_stable
/// accepts a root module with more than the host knows — unless it needs something of the
/// host this one lacks (see `loader.rs`).
pub fn api_compatible(plugin: &semver::Version, host: &semver::Version) -> bool {
    if host.major == 0 {
        plugin.major == 0 && plugin.minor == host.minor
    } else {
        plugin.major == host.major
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use semver::Version;

    #[test]
    fn same_major_loads_either_way() {
        let host = Version::new(1, 1, 0);
        assert!(api_compatible(&Version::new(1, 0, 0), &host));
        assert!(api_compatible(&Version::new(1, 7, 3), &host));
        assert!(!api_compatible(&Version::new(2, 0, 0), &host));
        assert!(!api_compatible(&Version::new(0, 9, 0), &host));
    }
}
