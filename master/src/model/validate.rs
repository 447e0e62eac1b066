//! Field validators shared by the object kinds. Each returns `Error::Invalid` naming the field and
//! the rule, e.g. `invalid tenantName: must be at most 64 characters`.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Result};

/// Contiv's NAME rule: dot-separated labels of letters, digits and inner hyphens.
pub fn name(field: &str, value: &str, max: usize) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(field, "is required"));
    }
    optional_name(field, value, max)
}

/// NAME, or empty.
pub fn optional_name(field: &str, value: &str, max: usize) -> Result<()> {
    if value.len() > max {
        return Err(Error::invalid(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    if value.is_empty() {
        return Ok(());
    }
    for label in value.split('.') {
        let ok = !label.is_empty()
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(Error::invalid(
                field,
                format!(
                    "{value:?} must be letters, digits and inner hyphens, optionally dot-separated"
                ),
            ));
        }
    }
    Ok(())
}

/// At most `max` characters.
pub fn max_len(field: &str, value: &str, max: usize) -> Result<()> {
    if value.len() > max {
        return Err(Error::invalid(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    Ok(())
}

/// One of `allowed` (empty allowed only if listed).
pub fn one_of(field: &str, value: &str, allowed: &[&str]) -> Result<()> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!("{value:?} must be one of {allowed:?}"),
        ))
    }
}

/// An IPv4 address, or empty.
pub fn optional_ipv4(field: &str, value: &str) -> Result<Option<Ipv4Addr>> {
    if value.is_empty() {
        return Ok(None);
    }
    value
        .parse()
        .map(Some)
        .map_err(|_| Error::invalid(field, format!("{value:?} is not an IPv4 address")))
}

/// An IPv6 address, or empty.
pub fn optional_ipv6(field: &str, value: &str) -> Result<Option<Ipv6Addr>> {
    if value.is_empty() {
        return Ok(None);
    }
    value
        .parse()
        .map(Some)
        .map_err(|_| Error::invalid(field, format!("{value:?} is not an IPv6 address")))
}

/// An integer within `min..=max`.
pub fn range(field: &str, value: i64, min: i64, max: i64) -> Result<()> {
    if value < min || value > max {
        return Err(Error::invalid(
            field,
            format!("{value} must be between {min} and {max}"),
        ));
    }
    Ok(())
}

/// The URL key must match the key derived from the fields.
pub fn key_matches(url_key: &str, derived: &str) -> Result<()> {
    if url_key != derived {
        return Err(Error::invalid(
            "key",
            format!("{url_key:?} does not match the fields (expected {derived:?})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_contiv_rule() {
        assert!(name("n", "default", 64).is_ok());
        assert!(name("n", "a-b.c1", 64).is_ok());
        assert!(name("n", "", 64).is_err());
        assert!(name("n", "-a", 64).is_err());
        assert!(name("n", "a_b", 64).is_err());
        assert!(name("n", "a..b", 64).is_err());
        assert!(name("n", &"a".repeat(65), 64).is_err());
        assert!(optional_name("n", "", 64).is_ok());
        let e = name("tenantName", "a:b", 64).unwrap_err().to_string();
        assert!(e.starts_with("invalid tenantName:"), "{e}");
    }
}
