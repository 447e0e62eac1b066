//! RFC 3339 timestamps as endpoint announcements carry them (`2026-11-21T06:41:53.123456789Z`,
//! `...+02:00`), reduced to an instant that orders correctly whatever the precision or offset.
//!
//! Only comparison is needed (the newest announcement of an endpoint wins), so the value is
//! `(seconds since 1970-01-01T00:00:00Z, nanoseconds)`.

/// A point in time, ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant {
    pub secs: i64,
    pub nanos: u32,
}

/// Days from 1970-01-01 to `y-m-d` in the proleptic Gregorian calendar.
fn days_since_epoch(y: i64, m: u32, d: u32) -> i64 {
    // Count years from March so the leap day is the last day of the year.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (i64::from(m) + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(d) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// `(year, month, day)` of the day `days` after 1970-01-01 (inverse of [`days_since_epoch`]).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `instant` as RFC 3339 in UTC with nanoseconds (`2026-11-21T06:41:53.500000000Z`).
pub fn format(instant: Instant) -> String {
    let days = instant.secs.div_euclid(86_400);
    let rem = instant.secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        instant.nanos
    )
}

/// Now, as RFC 3339.
pub fn now() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format(Instant {
        secs: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nanos: since.subsec_nanos(),
    })
}

fn num(s: &str, range: std::ops::RangeInclusive<u32>) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|v| range.contains(v))
}

/// Parse an RFC 3339 date-time; `None` if it is not one.
pub fn parse(s: &str) -> Option<Instant> {
    let (date, time) = s.split_once(['T', 't'])?;
    let mut d = date.splitn(3, '-');
    let year = i64::from(num(d.next()?, 0..=9999)?);
    let month = num(d.next()?, 1..=12)?;
    let day = num(d.next()?, 1..=31)?;
    // The offset starts at Z or at the first sign after the seconds.
    let split = time.find(['Z', 'z', '+', '-'])?;
    let (clock, offset) = time.split_at(split);
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut t = hms.splitn(3, ':');
    let hour = num(t.next()?, 0..=23)?;
    let minute = num(t.next()?, 0..=59)?;
    let second = num(t.next()?, 0..=60)?;
    let nanos = if fraction.is_empty() {
        0
    } else {
        if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits: u32 = fraction.parse().ok()?;
        digits * 10u32.pow(9 - fraction.len() as u32)
    };
    let offset_secs = match offset {
        "Z" | "z" => 0,
        o => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (h, m) = o[1..].split_once(':')?;
            sign * i64::from(num(h, 0..=23)? * 3600 + num(m, 0..=59)? * 60)
        }
    };
    let secs = days_since_epoch(year, month, day) * 86_400
        + i64::from(hour * 3600 + minute * 60 + second)
        - offset_secs;
    Some(Instant { secs, nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(
            parse("1970-01-01T00:00:00Z"),
            Some(Instant { secs: 0, nanos: 0 })
        );
        assert_eq!(
            parse("2000-03-01T00:00:00Z").map(|i| i.secs),
            Some(951_868_800)
        );
        assert_eq!(
            parse("2026-11-21T06:41:53.5Z"),
            Some(Instant {
                secs: 1_795_243_313, // date -u -d 2026-11-21T06:41:53Z +%s
                nanos: 500_000_000
            })
        );
    }

    #[test]
    fn precision_and_offsets_order_correctly() {
        let a = parse("2026-11-21T06:41:53.5Z").unwrap();
        let b = parse("2026-11-21T06:41:53.55Z").unwrap();
        assert!(a < b, "text order would say otherwise");
        let c = parse("2026-11-21T08:41:53.5+02:00").unwrap();
        assert_eq!(a, c);
        let d = parse("2026-11-21T01:41:53.123456789-05:00").unwrap();
        assert!(d < a);
    }

    #[test]
    fn format_round_trips_through_parse() {
        for secs in [
            0i64,
            951_868_800,
            1_795_243_313,
            4_102_444_800,
            1_709_164_800,
        ] {
            let i = Instant { secs, nanos: 123 };
            assert_eq!(parse(&format(i)), Some(i), "{}", format(i));
        }
        assert_eq!(
            format(Instant {
                secs: 1_795_243_313,
                nanos: 500_000_000
            }),
            "2026-11-21T06:41:53.500000000Z"
        );
        assert!(parse(&now()).is_some());
    }

    #[test]
    fn garbage_is_none() {
        for s in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-21 06:41:53Z",
            "2026-11-21T06:41:53",
            "2026-11-21T06:41:53.1234567890Z",
        ] {
            assert_eq!(parse(s), None, "{s}");
        }
    }
}
