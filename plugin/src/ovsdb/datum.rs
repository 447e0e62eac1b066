//! OVSDB values in their RFC 7047 JSON notation (§5.1), both directions.
//!
//! An atom is a JSON string, number or boolean, or `["uuid", "<uuid>"]` /
//! `["named-uuid", "<name>"]`. A set is `["set", [atoms]]`, except that a set of exactly one
//! element may be sent as the bare atom (the server does this for optional columns such as
//! `Port.tag`). A map is `["map", [[key, value], ...]]`. Encoders here always produce the explicit
//! form; decoders accept both.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Value, json};

/// A row identifier as assigned by ovsdb-server.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uuid(pub String);

impl Uuid {
    /// The JSON atom `["uuid", "<self>"]`.
    pub fn to_json(&self) -> Value {
        json!(["uuid", self.0])
    }

    /// Decode a `["uuid", "..."]` atom.
    pub fn from_json(value: &Value) -> Option<Uuid> {
        match value.as_array().map(Vec::as_slice) {
            Some([tag, Value::String(id)]) if tag == "uuid" => Some(Uuid(id.clone())),
            _ => None,
        }
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `["named-uuid", name]`: refers to a row inserted earlier in the same transaction.
pub fn named_uuid(name: &str) -> Value {
    json!(["named-uuid", name])
}

/// `["set", [..]]` of already-encoded atoms.
pub fn set<I: IntoIterator<Item = Value>>(atoms: I) -> Value {
    json!(["set", atoms.into_iter().collect::<Vec<_>>()])
}

/// The empty set, which is how an optional column (`Port.tag`) is cleared.
pub fn empty_set() -> Value {
    set(std::iter::empty())
}

/// `["map", [[k, v], ..]]` of string keys and values.
pub fn string_map<'a, I: IntoIterator<Item = (&'a str, &'a str)>>(pairs: I) -> Value {
    json!([
        "map",
        pairs
            .into_iter()
            .map(|(k, v)| json!([k, v]))
            .collect::<Vec<_>>()
    ])
}

/// The elements of a set column: a bare atom counts as a set of one.
pub fn set_elements(value: &Value) -> Vec<&Value> {
    match value.as_array().map(Vec::as_slice) {
        Some([tag, Value::Array(items)]) if tag == "set" => items.iter().collect(),
        _ => vec![value],
    }
}

/// The uuids held by a reference column (a set of uuids, or one uuid).
pub fn uuid_set(value: &Value) -> Vec<Uuid> {
    set_elements(value)
        .into_iter()
        .filter_map(Uuid::from_json)
        .collect()
}

/// The strings held by a set-of-strings column.
pub fn string_set(value: &Value) -> Vec<String> {
    set_elements(value)
        .into_iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// An optional integer column (`["set", []]` when absent, else the integer).
pub fn optional_int(value: &Value) -> Option<i64> {
    set_elements(value).first().and_then(|v| v.as_i64())
}

/// An optional string column.
pub fn optional_string(value: &Value) -> Option<String> {
    set_elements(value)
        .first()
        .and_then(|v| v.as_str())
        .map(str::to_owned)
}

/// A map column with string keys and values; entries of other types are skipped.
pub fn string_map_entries(value: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some([tag, Value::Array(pairs)]) = value.as_array().map(Vec::as_slice)
        && tag == "map"
    {
        for pair in pairs {
            if let Some([Value::String(k), Value::String(v)]) = pair.as_array().map(Vec::as_slice) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_decode_in_both_forms() {
        assert_eq!(optional_int(&json!(5)), Some(5));
        assert_eq!(optional_int(&json!(["set", []])), None);
        assert_eq!(optional_int(&json!(["set", [7]])), Some(7));
        assert_eq!(
            uuid_set(&json!(["set", [["uuid", "a"], ["uuid", "b"]]])),
            vec![Uuid("a".into()), Uuid("b".into())]
        );
        assert_eq!(uuid_set(&json!(["uuid", "a"])), vec![Uuid("a".into())]);
        assert_eq!(
            string_set(&json!(["set", ["OpenFlow13", "OpenFlow10"]])),
            vec!["OpenFlow13".to_string(), "OpenFlow10".to_string()]
        );
        assert_eq!(string_set(&json!("secure")), vec!["secure".to_string()]);
    }

    #[test]
    fn maps_round_trip() {
        let encoded = string_map([("remote_ip", "10.0.0.2"), ("key", "flow")]);
        assert_eq!(
            encoded,
            json!(["map", [["remote_ip", "10.0.0.2"], ["key", "flow"]]])
        );
        let decoded = string_map_entries(&encoded);
        assert_eq!(decoded.get("key").map(String::as_str), Some("flow"));
        assert_eq!(decoded.len(), 2);
        assert!(string_map_entries(&json!(["set", []])).is_empty());
    }

    #[test]
    fn uuid_atoms() {
        let u = Uuid("0b6e1a4c-0000-4000-8000-000000000001".into());
        assert_eq!(Uuid::from_json(&u.to_json()), Some(u));
        assert_eq!(Uuid::from_json(&json!(["named-uuid", "x"])), None);
        assert_eq!(named_uuid("x"), json!(["named-uuid", "x"]));
    }
}
