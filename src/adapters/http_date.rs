//! HTTP-date (RFC 9110 §5.6.7): the three forms a recipient must accept, read as
//! seconds since the Unix epoch. Written here rather than pulled in (`httpdate`):
//! it is one small pure function, and the crate adds no dependency for it.

/// Seconds since 1970-01-01T00:00:00Z of an HTTP-date, in any of its three forms:
///
/// * IMF-fixdate (what senders must send): `Sun, 06 Nov 1994 08:49:37 GMT`
/// * obsolete RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT` (a two-digit year is taken
///   in 1970-2069, as RFC 9110 asks: "more than 50 years in the future" is the past)
/// * obsolete asctime: `Sun Nov  6 08:49:37 1994`
///
/// The day name is not checked against the date (a sender's mistake there should not
/// lose the date). Anything else, or an impossible date or time, is `None`.
pub(crate) fn parse(text: &str) -> Option<u64> {
    let text = text.trim();
    let (day_name, rest) = text.split_once([',', ' '])?;
    if text.as_bytes().get(day_name.len()) == Some(&b',') {
        let rest = rest.trim_start();
        if rest.contains('-') {
            rfc850(rest)
        } else {
            imf_fixdate(rest)
        }
    } else {
        asctime(rest.trim_start())
    }
}

/// `06 Nov 1994 08:49:37 GMT`
fn imf_fixdate(rest: &str) -> Option<u64> {
    let mut parts = rest.split(' ');
    let day = number(parts.next()?, 2)?;
    let month = month(parts.next()?)?;
    let year = number(parts.next()?, 4)?;
    let time = time(parts.next()?)?;
    (parts.next()? == "GMT" && parts.next().is_none()).then_some(())?;
    seconds(year, month, day, time)
}

/// `06-Nov-94 08:49:37 GMT`
fn rfc850(rest: &str) -> Option<u64> {
    let mut parts = rest.split(' ');
    let mut date = parts.next()?.split('-');
    let day = number(date.next()?, 2)?;
    let month = month(date.next()?)?;
    let yy = number(date.next()?, 2)?;
    date.next().is_none().then_some(())?;
    let time = time(parts.next()?)?;
    (parts.next()? == "GMT" && parts.next().is_none()).then_some(())?;
    let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
    seconds(year, month, day, time)
}

/// `Nov  6 08:49:37 1994` (the day is space-padded to two characters)
fn asctime(rest: &str) -> Option<u64> {
    let mut parts = rest.split(' ').filter(|p| !p.is_empty());
    let month = month(parts.next()?)?;
    let day_text = parts.next()?;
    let day = number(day_text, day_text.len().clamp(1, 2))?;
    let time = time(parts.next()?)?;
    let year = number(parts.next()?, 4)?;
    parts.next().is_none().then_some(())?;
    seconds(year, month, day, time)
}

/// Exactly `digits` ASCII digits.
fn number(text: &str, digits: usize) -> Option<u64> {
    if text.len() != digits || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn month(text: &str) -> Option<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let index = MONTHS.iter().position(|m| *m == text)?;
    Some(index as u64 + 1)
}

/// `hh:mm:ss` as seconds into the day (a leap second, `:60`, is accepted).
fn time(text: &str) -> Option<u64> {
    let mut parts = text.split(':');
    let h = number(parts.next()?, 2)?;
    let m = number(parts.next()?, 2)?;
    let s = number(parts.next()?, 2)?;
    (parts.next().is_none() && h < 24 && m < 60 && s <= 60).then_some(h * 3600 + m * 60 + s)
}

/// Seconds since the epoch of a civil date and time of day (UTC), or `None` for an
/// impossible date or one before 1970.
fn seconds(year: u64, month: u64, day: u64, time: u64) -> Option<u64> {
    let leap = (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400);
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if year < 1970 || day == 0 || day > days_in_month {
        return None;
    }
    // Days from the epoch to the first of the year, then of the month.
    let leaps_before = |y: u64| (y - 1) / 4 - (y - 1) / 100 + (y - 1) / 400;
    let mut days = (year - 1970) * 365 + leaps_before(year) - leaps_before(1970);
    const CUMULATIVE: [u64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    days += CUMULATIVE[(month - 1) as usize] + u64::from(leap && month > 2) + (day - 1);
    days.checked_mul(86_400)?.checked_add(time)
}

#[cfg(test)]
mod tests {
    use super::parse;

    /// RFC 9110's example instant in all three forms.
    const INSTANT: u64 = 784_111_777;

    #[test]
    fn the_three_forms_of_rfc_9110s_example_agree() {
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), Some(INSTANT));
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT"), Some(INSTANT));
        assert_eq!(parse("Sun Nov  6 08:49:37 1994"), Some(INSTANT));
    }

    #[test]
    fn epoch_leap_days_and_two_digit_years() {
        assert_eq!(parse("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse("Tue, 29 Feb 2000 00:00:00 GMT"), Some(951_782_400));
        assert_eq!(parse("Wed, 01 Mar 2100 00:00:00 GMT"), Some(4_107_542_400));
        assert_eq!(parse("Thursday, 01-Jan-70 00:00:00 GMT"), Some(0));
        // 69 is 2069, not 1969.
        assert_eq!(
            parse("Tuesday, 01-Jan-69 00:00:00 GMT"),
            Some(3_124_224_000)
        );
    }

    #[test]
    fn malformed_dates_are_none() {
        for bad in [
            "",
            "tomorrow",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Mon, 29 Feb 2100 00:00:00 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1969 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT extra",
            "Sun Nov  6 08:49:37",
            "120",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
