//! Times on the command line: a time ago ("2h", "30m") or an RFC 3339 time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Failure;

/// A time ago or an RFC 3339 time, as microseconds since the Unix epoch.
pub fn instant(flag: &str, text: &str, now: SystemTime) -> Result<i64, Failure> {
    let at = match humantime::parse_duration(text) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(UNIX_EPOCH),
        Err(_) => humantime::parse_rfc3339_weak(text).map_err(|_| {
            Failure::usage(format!(
                "{flag} '{text}' is neither a time ago (like 2h or 30m) nor an RFC 3339 time (like 2026-11-22T10:00:00Z)"
            ))
        })?,
    };
    let micros = at
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_micros();
    Ok(i64::try_from(micros).unwrap_or(i64::MAX))
}
