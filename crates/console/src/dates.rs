//! Dates in forms (`YYYY-MM-DD`, UTC) and times on pages.

use imagegate_store::Timestamp;

/// Parses `YYYY-MM-DD` into days since 1970-01-01 (UTC); `None` if it is not a real date.
pub(crate) fn parse_day(text: &str) -> Option<i64> {
    let mut parts = text.trim().splitn(3, '-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: u32 = parts.next()?.parse().ok()?;
    let day: u32 = parts.next()?.parse().ok()?;
    if !(1..=9999).contains(&year)
        || !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
    {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD HH:MM` (UTC).
pub(crate) fn minute(ts: Timestamp) -> String {
    let text = ts.to_string();
    // `Timestamp` displays as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    text.get(..16).map_or(text.clone(), |s| s.replacen('T', " ", 1))
}

/// `HH:MM:SS` (UTC) when `ts` is today relative to `now`, else `YYYY-MM-DD HH:MM`.
pub(crate) fn short(ts: Timestamp, now: Timestamp) -> String {
    let text = ts.to_string();
    if ts.unix_day() == now.unix_day() {
        text.get(11..19).map_or(text.clone(), str::to_owned)
    } else {
        minute(ts)
    }
}

/// A [`Timestamp`] from dispatcher milliseconds.
pub(crate) fn from_unix_millis(ms: u64) -> Timestamp {
    Timestamp::from_unix_ms(i64::try_from(ms).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_dates_only() {
        assert_eq!(parse_day("1970-01-01"), Some(0));
        assert_eq!(
            parse_day("2024-12-31"),
            Some(Timestamp::from_unix_ms(1_735_603_200_000).unix_day())
        );
        assert_eq!(
            parse_day("2000-02-29")
                .map(|d| Timestamp::start_of_unix_day(d).date_string())
                .as_deref(),
            Some("2000-02-29")
        );
        assert_eq!(parse_day("2023-02-29"), None);
        assert_eq!(parse_day("2023-13-01"), None);
        assert_eq!(parse_day("yesterday"), None);
        assert_eq!(parse_day(""), None);
    }

    #[test]
    fn round_trips_every_day_of_a_few_years() {
        for day in 10_000..12_000 {
            let text = Timestamp::start_of_unix_day(day).date_string();
            assert_eq!(parse_day(&text), Some(day), "{text}");
        }
    }

    #[test]
    fn formats_times() {
        let ts = Timestamp::from_unix_ms(1_735_603_200_000 + 3_723_000);
        assert_eq!(minute(ts), "2024-12-31 01:02");
        assert_eq!(short(ts, ts), "01:02:03");
        let next_day = Timestamp::from_unix_ms(1_735_603_200_000 + 86_400_000);
        assert_eq!(short(ts, next_day), "2024-12-31 01:02");
    }
}
