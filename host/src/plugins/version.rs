//! The plugin-API version this host speaks, and which plugin versions it can load.

/// The plugin-API version this host was built with.
pub fn host_api() -> semver::Version {
    semver::Version::parse(stet_plugin_api::API_VERSION).expect("API_VERSION is semver")
}

/// Whether a plugin built for `plugin` can be loaded by a host speaking `host`.
///
/// Same major version (for 0.x, same minor): a plugin built for an older minor version
/// loads through the frozen interface modules, and one built for a newer minor version
/// loads because abi_stable accepts a root module with more fields than the host knows.
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
