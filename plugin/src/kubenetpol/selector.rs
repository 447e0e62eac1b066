//! Kubernetes label selectors (`matchLabels` and `matchExpressions`), as the API defines them.
//!
//! Contract: a selector with neither part selects everything; the parts are ANDed; operators
//! are `In`, `NotIn`, `Exists`, `DoesNotExist` (`In` and `NotIn` need values, `Exists` and
//! `DoesNotExist` must have none). A selector that breaks these rules is an error naming the
//! requirement, never a silent "matches nothing" (the API server refuses such objects, so one
//! only comes from a server that did not validate).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Labels of an object, sorted by key, each key once.
///
/// One boxed slice rather than a `BTreeMap`: netplugin keeps the labels of every pod and
/// namespace of the cluster, most have two to five, and a `BTreeMap`'s first node has room for
/// eleven (with [`NamedPorts`](super::resolve::NamedPorts) likewise, a pod with three labels
/// and a named port went from 1,450 to 619 bytes in the policy controller's cache).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Labels(Box<[(Box<str>, Box<str>)]>);

impl Labels {
    /// No labels.
    pub fn new() -> Labels {
        Labels::default()
    }

    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    /// Whether label `key` is there (with any value).
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The labels, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }
}

/// An object's `metadata.labels` as the API gives them (keys already unique).
impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Labels {
        Labels(
            map.into_iter()
                .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
                .collect(),
        )
    }
}

/// Pairs in any order; of a key given twice the last value counts (as with a map).
impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Labels {
        pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect::<BTreeMap<String, String>>()
            .into()
    }
}

/// A selector that cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label selector requirement on {key:?}: {problem}")]
pub struct SelectorError {
    pub key: String,
    pub problem: String,
}

/// One requirement, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A checked selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Check `selector`; the error names the requirement that is not valid.
    pub fn new(selector: &LabelSelector) -> Result<Selector, SelectorError> {
        let mut requirements: Vec<Requirement> = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement::In(k.clone(), vec![v.clone()]))
            .collect();
        for e in selector.match_expressions.iter().flatten() {
            let error = |problem: &str| SelectorError {
                key: e.key.clone(),
                problem: problem.to_string(),
            };
            let values = e.values.clone().unwrap_or_default();
            requirements.push(match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(error(&format!("operator {} needs values", e.operator)));
                }
                "In" => Requirement::In(e.key.clone(), values),
                "NotIn" => Requirement::NotIn(e.key.clone(), values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(error(&format!("operator {} takes no values", e.operator)));
                }
                "Exists" => Requirement::Exists(e.key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
                other => {
                    return Err(error(&format!(
                        "unknown operator {other:?} (In, NotIn, Exists and DoesNotExist are)"
                    )));
                }
            });
        }
        Ok(Selector { requirements })
    }

    /// Whether it selects everything (the empty selector).
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, values) => {
                labels.get(k).is_some_and(|v| values.iter().any(|x| x == v))
            }
            Requirement::NotIn(k, values) => {
                labels.get(k).is_none_or(|v| values.iter().all(|x| x != v))
            }
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(value: serde_json::Value) -> Result<Selector, SelectorError> {
        Selector::new(&serde_json::from_value(value).unwrap())
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn labels_are_found_by_key_whatever_order_they_came_in() {
        let l: Labels = [("tier", "front"), ("app", "web"), ("tier", "edge")]
            .into_iter()
            .collect();
        assert_eq!(l.get("app"), Some("web"));
        // A key given twice keeps its last value, as a map would.
        assert_eq!(l.get("tier"), Some("edge"));
        assert!(l.contains_key("tier") && !l.contains_key("team"));
        assert_eq!(l.get(""), None);
        assert_eq!(
            l.iter().collect::<Vec<_>>(),
            [("app", "web"), ("tier", "edge")]
        );
        let from_map = Labels::from(BTreeMap::from([
            ("tier".to_string(), "edge".to_string()),
            ("app".to_string(), "web".to_string()),
        ]));
        assert_eq!(from_map, l);
        assert_eq!(Labels::new().get("app"), None);
    }

    #[test]
    fn empty_selects_everything_and_parts_are_anded() {
        let all = selector(json!({})).unwrap();
        assert!(all.is_everything() && all.matches(&labels(&[])));
        let s = selector(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "team", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"},
            ]
        }))
        .unwrap();
        let good = [("app", "web"), ("tier", "edge"), ("team", "a")];
        assert!(s.matches(&labels(&good)));
        // A pair given after `good` replaces its key's value there.
        let with = |extra: (&'static str, &'static str)| labels(&[&good[..], &[extra]].concat());
        assert!(!s.matches(&with(("env", "dev"))));
        assert!(!s.matches(&with(("legacy", ""))));
        assert!(!s.matches(&labels(&good[..2])), "without team");
        assert!(!s.matches(&with(("tier", "back"))));
        assert!(!s.matches(&with(("app", "db"))));
        assert!(s.matches(&with(("env", "prod"))));
    }

    #[test]
    fn invalid_requirements_are_named() {
        for (req, problem) in [
            (json!({"key": "a", "operator": "In"}), "needs values"),
            (
                json!({"key": "a", "operator": "Exists", "values": ["x"]}),
                "takes no values",
            ),
            (json!({"key": "a", "operator": "Gt", "values": ["1"]}), "Gt"),
        ] {
            let err = selector(json!({"matchExpressions": [req]})).unwrap_err();
            assert!(err.to_string().contains(problem), "{err}");
            assert!(err.to_string().contains("\"a\""), "{err}");
        }
    }
}
