//! [`Timestamp`]: milliseconds since the Unix epoch, the one time type of the store.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

const MS_PER_DAY: i64 = 86_400_000;

/// A point in time in milliseconds since 1970-01-01T00:00:00Z (UTC).
///
/// Stored as a 64-bit integer in both backends, so day buckets are plain integer division.
/// Serializes as the integer; `Display` gives RFC 3339 (`2025-01-31T12:00:00.000Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The current time (the epoch if the clock is before it).
    pub fn now() -> Self {
        Self::from(SystemTime::now())
    }

    /// From milliseconds since the epoch.
    pub const fn from_unix_ms(ms: i64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the epoch.
    pub const fn unix_ms(self) -> i64 {
        self.0
    }

    /// Days since the epoch (UTC), rounding toward minus infinity.
    pub const fn unix_day(self) -> i64 {
        self.0.div_euclid(MS_PER_DAY)
    }

    /// The start (00:00 UTC) of the given day since the epoch.
    pub const fn start_of_unix_day(day: i64) -> Self {
        Self(day.saturating_mul(MS_PER_DAY))
    }

    /// This time plus `duration` (saturating).
    pub fn saturating_add(self, duration: Duration) -> Self {
        let ms = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(ms))
    }

    /// This time minus `duration` (saturating).
    pub fn saturating_sub(self, duration: Duration) -> Self {
        let ms = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_sub(ms))
    }

    /// The UTC calendar date as `YYYY-MM-DD`.
    pub fn date_string(self) -> String {
        let (y, m, d) = civil_from_days(self.unix_day());
        format!("{y:04}-{m:02}-{d:02}")
    }
}

impl From<SystemTime> for Timestamp {
    fn from(time: SystemTime) -> Self {
        let ms = time
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Self(ms)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms_of_day = self.0.rem_euclid(MS_PER_DAY);
        let (h, rest) = (ms_of_day / 3_600_000, ms_of_day % 3_600_000);
        let (min, rest) = (rest / 60_000, rest % 60_000);
        let (s, ms) = (rest / 1000, rest % 1000);
        write!(f, "{}T{h:02}:{min:02}:{s:02}.{ms:03}Z", self.date_string())
    }
}

/// Converts days since 1970-01-01 to a proleptic Gregorian (year, month, day) in UTC.
/// Howard Hinnant's `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days.saturating_add(719_468);
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(Timestamp::from_unix_ms(0).to_string(), "1970-01-01T00:00:00.000Z");
        // 2000-02-29T23:59:59.999Z, a leap day.
        assert_eq!(
            Timestamp::from_unix_ms(951_868_799_999).to_string(),
            "2000-02-29T23:59:59.999Z"
        );
        // 2024-12-31T00:00:00Z
        assert_eq!(
            Timestamp::from_unix_ms(1_735_603_200_000).date_string(),
            "2024-12-31"
        );
        // One millisecond before the epoch is still 1969-12-31.
        assert_eq!(
            Timestamp::from_unix_ms(-1).to_string(),
            "1969-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn day_buckets() {
        let t = Timestamp::from_unix_ms(1_735_603_200_000 + 5_000);
        assert_eq!(
            Timestamp::start_of_unix_day(t.unix_day()).unix_ms(),
            1_735_603_200_000
        );
        assert_eq!(Timestamp::from_unix_ms(-1).unix_day(), -1);
    }
}
