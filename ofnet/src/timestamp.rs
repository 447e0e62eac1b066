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
