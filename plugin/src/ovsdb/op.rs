//! Transaction operations (RFC 7047 §5.2) as values, encoded to the `transact` JSON.
//!
//! Only the operations and condition functions this crate uses are modelled; each encodes to
//! exactly the object the RFC specifies, so a transaction can be inspected in unit tests without
//! a server.

use serde_json::{Map, Value, json};

use super::datum::Uuid;

/// One `where` clause: `[column, function, value]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub column: &'static str,
    pub function: &'static str,
    pub value: Value,
}

impl Condition {
    /// `column == value`.
    pub fn eq(column: &'static str, value: Value) -> Self {
        Condition {
            column,
            function: "==",
            value,
        }
    }

    /// The row with this uuid.
    pub fn uuid(uuid: &Uuid) -> Self {
        Self::eq("_uuid", uuid.to_json())
    }

    /// The row whose `name` column is `name`.
    pub fn name(name: &str) -> Self {
        Self::eq("name", Value::String(name.to_owned()))
    }

    fn to_json(&self) -> Value {
        json!([self.column, self.function, self.value])
    }
}

/// One `mutate` mutation: `[column, mutator, value]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Mutation {
    pub column: &'static str,
    pub mutator: &'static str,
    pub value: Value,
}

impl Mutation {
    /// Add elements to a set, or pairs whose key is absent to a map.
    pub fn insert(column: &'static str, value: Value) -> Self {
        Mutation {
            column,
            mutator: "insert",
            value,
        }
    }

    /// Remove elements from a set, or keys (given as a set) / pairs (given as a map) from a map.
    pub fn delete(column: &'static str, value: Value) -> Self {
        Mutation {
            column,
            mutator: "delete",
            value,
        }
    }

    /// Add to an integer column.
    pub fn add(column: &'static str, amount: i64) -> Self {
        Mutation {
            column,
            mutator: "+=",
            value: json!(amount),
        }
    }

    fn to_json(&self) -> Value {
        json!([self.column, self.mutator, self.value])
    }
}

/// A transaction operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    Insert {
        table: &'static str,
        row: Map<String, Value>,
        /// Lets later operations of the same transaction refer to the new row.
        uuid_name: Option<String>,
    },
    Update {
        table: &'static str,
        conditions: Vec<Condition>,
        row: Map<String, Value>,
    },
    Mutate {
        table: &'static str,
        conditions: Vec<Condition>,
        mutations: Vec<Mutation>,
    },
    Delete {
        table: &'static str,
        conditions: Vec<Condition>,
    },
    Select {
        table: &'static str,
        conditions: Vec<Condition>,
        columns: Vec<&'static str>,
    },
    /// A comment recorded in the database log (shows up in `ovsdb-tool show-log`).
    Comment(String),
}

impl Operation {
    /// The RFC name of the operation (`"insert"`, ...), used in error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Insert { .. } => "insert",
            Operation::Update { .. } => "update",
            Operation::Mutate { .. } => "mutate",
            Operation::Delete { .. } => "delete",
            Operation::Select { .. } => "select",
            Operation::Comment(_) => "comment",
        }
    }

    /// The table the operation touches (empty for a comment).
    pub fn table(&self) -> &'static str {
        match self {
            Operation::Insert { table, .. }
            | Operation::Update { table, .. }
            | Operation::Mutate { table, .. }
            | Operation::Delete { table, .. }
            | Operation::Select { table, .. } => table,
            Operation::Comment(_) => "",
        }
    }

    /// The operation's JSON object.
    pub fn to_json(&self) -> Value {
        fn conds(c: &[Condition]) -> Value {
            Value::Array(c.iter().map(Condition::to_json).collect())
        }
        match self {
            Operation::Insert {
                table,
                row,
                uuid_name,
            } => {
                let mut op = json!({"op": "insert", "table": table, "row": row});
                if let (Some(name), Some(obj)) = (uuid_name, op.as_object_mut()) {
                    obj.insert("uuid-name".into(), Value::String(name.clone()));
                }
                op
            }
            Operation::Update {
                table,
                conditions,
                row,
            } => json!({"op": "update", "table": table, "where": conds(conditions), "row": row}),
            Operation::Mutate {
                table,
                conditions,
                mutations,
            } => json!({
                "op": "mutate",
                "table": table,
                "where": conds(conditions),
                "mutations": mutations.iter().map(Mutation::to_json).collect::<Vec<_>>(),
            }),
            Operation::Delete { table, conditions } => {
                json!({"op": "delete", "table": table, "where": conds(conditions)})
            }
            Operation::Select {
                table,
                conditions,
                columns,
            } => {
                json!({"op": "select", "table": table, "where": conds(conditions), "columns": columns})
            }
            Operation::Comment(text) => json!({"op": "comment", "comment": text}),
        }
    }
}

/// Build a row object from `(column, value)` pairs.
pub fn row<I: IntoIterator<Item = (&'static str, Value)>>(columns: I) -> Map<String, Value> {
    columns
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ovsdb::datum::{named_uuid, set};

    #[test]
    fn insert_carries_uuid_name() {
        let op = Operation::Insert {
            table: "Bridge",
            row: row([("name", json!("br0"))]),
            uuid_name: Some("newbr".into()),
        };
        assert_eq!(
            op.to_json(),
            json!({"op":"insert","table":"Bridge","row":{"name":"br0"},"uuid-name":"newbr"})
        );
    }

    #[test]
    fn mutate_encodes_where_and_mutations() {
        let op = Operation::Mutate {
            table: "Bridge",
            conditions: vec![Condition::name("br0")],
            mutations: vec![Mutation::insert("ports", set([named_uuid("p")]))],
        };
        assert_eq!(
            op.to_json(),
            json!({"op":"mutate","table":"Bridge","where":[["name","==","br0"]],
                   "mutations":[["ports","insert",["set",[["named-uuid","p"]]]]]})
        );
        assert_eq!(op.name(), "mutate");
        assert_eq!(op.table(), "Bridge");
    }
}
