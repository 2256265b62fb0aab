//! Keystone's timestamps (`expires_at`, `issued_at`) as milliseconds since the Unix epoch.

/// Keystone's `2026-11-26T08:04:50.000000Z` (UTC, fraction optional) in ms since the epoch.
pub fn parse_time(text: &str) -> Option<i64> {
    let text = text.strip_suffix('Z').unwrap_or(text);
    let (date, time) = text.split_once('T')?;
    let mut d = date.splitn(3, '-').map(str::parse::<i64>);
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':').map(str::parse::<i64>);
    let (h, min, s) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || h > 23 || min > 59 || s > 60 {
        return None;
    }
    let millis = match fraction {
        "" => 0,
        f if f.bytes().all(|b| b.is_ascii_digit()) => format!("{f:0<3}")[..3].parse().ok()?,
        _ => return None,
    };
    // Days from 1970-01-01 to y-m-day (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + min) * 60_000 + s * 1000 + millis)
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
            ("yesterday", None),
            ("2026-11-26T08:04:50.12x", None),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_time(text), ms, "{text}");
        }
    }
}
