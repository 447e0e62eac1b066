//! Kubernetes label selectors (`matchLabels` and `matchExpressions`), as the API defines them.
//!
//! Contract: a selector with neither part selects everything; the parts are ANDed; operators
//! are `In`, `NotIn`, `Exists`, `DoesNotExist` (`In` and `NotIn` need values, `Exists` and
//! `DoesNotExist` must have none). A selector that breaks these rules is an error naming the
//! requirement, never a silent "matches nothing" (the API server refuses such objects, so one
//! only comes from a server that did not validate).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Labels of an object.
pub type Labels = BTreeMap<String, String>;

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
            Requirement::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
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
        let good = labels(&[("app", "web"), ("tier", "edge"), ("team", "a")]);
        assert!(s.matches(&good));
        let mut other = good.clone();
        other.insert("env".into(), "dev".into());
        assert!(!s.matches(&other));
        other = good.clone();
        other.insert("legacy".into(), "".into());
        assert!(!s.matches(&other));
        other = good.clone();
        other.remove("team");
        assert!(!s.matches(&other));
        other = good.clone();
        other.insert("tier".into(), "back".into());
        assert!(!s.matches(&other));
        other = good;
        other.insert("app".into(), "db".into());
        assert!(!s.matches(&other));
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
