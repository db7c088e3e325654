//! Time as stet writes it down: milliseconds since the Unix epoch for what it stamps
//! (receipts, leases, caches), and RFC 3339 for what a person reads. The lowest floor:
//! anything may use it, it uses nothing of stet's.
//!
//! A drive reads "now" through its own clock (`drive/time.rs`), so its scenarios can move
//! time; what runs outside a drive reads the system's through [`now_ms`].

use std::time::Duration;

/// Milliseconds since the Unix epoch, as receipts stamp a call (0 before the epoch).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The last second RFC 3339 can write: 9999-12-31T23:59:59Z.
const LAST_WRITABLE: i64 = 253_402_300_799;

/// A time as the display shows it: RFC 3339, UTC, to the second (a time from others — an
/// agent's reset — beyond the year 9999 is shown as that year's end).
pub fn clock(unix: i64) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + Duration::from_secs(unix.clamp(0, LAST_WRITABLE) as u64),
    )
    .to_string()
}

/// A time as a person reads it: `2100-01-01 00:00:00 UTC`.
pub fn utc(unix: i64) -> String {
    clock(unix).replacen('T', " ", 1).replace('Z', " UTC")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_time_reads_in_utc_and_one_past_the_year_9999_does_not_panic() {
        assert_eq!(super::utc(4_102_444_800), "2100-01-01 00:00:00 UTC");
        assert_eq!(super::clock(-5), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(i64::MAX), "9999-12-31 23:59:59 UTC");
    }
}
