//! Keystone's timestamps (`expires_at`, `issued_at`) as milliseconds since the Unix epoch.

/// Keystone's `2026-11-26T08:04:50.000000Z` (UTC, fraction optional) in ms since the epoch;
/// `None` for anything else, a day its month does not have included.
pub fn parse_time(text: &str) -> Option<i64> {
    let text = text.strip_suffix('Z').unwrap_or(text);
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc().timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keystone_times_are_read_as_utc_milliseconds() {
        let cases = [
            ("1970-01-01T00:00:00Z", Some(0)),
            ("1970-01-01T00:00:01.5Z", Some(1_500)),
            ("2026-11-26T08:04:50.000000Z", Some(1_795_680_290_000)),
            ("2000-02-29T12:00:00.123456Z", Some(951_825_600_123)),
            ("2026-13-01T00:00:00Z", None),
            ("2026-02-30T00:00:00Z", None),
            ("yesterday", None),
            ("2026-11-26T08:04:50.12x", None),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_time(text), ms, "{text}");
        }
    }
}
