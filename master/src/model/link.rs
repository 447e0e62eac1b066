//! Links between objects: `{"type": "<objType>", "key": "<objKey>"}`; `links` hold single links,
//! `link-sets` hold maps of key → link. The server maintains them; clients normally omit them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A one-way relation to another object. Empty when unset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Link {
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub obj_type: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
}

impl Link {
    pub fn to(obj_type: &str, key: &str) -> Self {
        Link {
            obj_type: obj_type.to_string(),
            key: key.to_string(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.key.is_empty()
    }
}

/// A set of links keyed by the target's key.
pub type LinkSet = BTreeMap<String, Link>;

/// Add `key` of type `obj_type` to a link set.
pub fn add(set: &mut LinkSet, obj_type: &str, key: &str) {
    set.insert(key.to_string(), Link::to(obj_type, key));
}

/// Remove `key` from a link set.
pub fn remove(set: &mut LinkSet, key: &str) {
    set.remove(key);
}
