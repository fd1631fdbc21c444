//! The JSON Schema of a namespace file, generated from [`crate::file::NamespaceFile`].
//!
//! schemars describes each field by its snake_case name only, while the parser also accepts the
//! camelCase spelling of every multi-word field (serde aliases). Left as generated, the schema
//! would reject camelCase files that the platform accepts; so each such property is listed under
//! both names, and a required one may be given in either spelling.

use serde_json::{Value, json};

pub fn json_schema() -> Value {
    let mut schema = schemars::schema_for!(crate::file::NamespaceFile).to_value();
    add_camel_case(&mut schema);
    if let Some(defs) = schema.get_mut("$defs").and_then(Value::as_object_mut) {
        defs.values_mut().for_each(add_camel_case);
    }
    schema
}

fn add_camel_case(object_schema: &mut Value) {
    let Some(object) = object_schema.as_object_mut() else {
        return;
    };
    let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    let aliases: Vec<(String, String)> = properties
        .keys()
        .filter(|key| is_snake_case_words(key))
        .map(|key| (key.clone(), camel_case(key)))
        .collect();
    for (snake, camel) in &aliases {
        if let Some(property) = properties.get(snake).cloned() {
            properties.insert(camel.clone(), property);
        }
    }
    let Some(required) = object.get("required").and_then(Value::as_array).cloned() else {
        return;
    };
    let (either, plain): (Vec<Value>, Vec<Value>) = required.into_iter().partition(|name| {
        aliases
            .iter()
            .any(|(snake, _)| name.as_str() == Some(snake))
    });
    object.insert("required".to_owned(), Value::Array(plain));
    let any_of: Vec<Value> = either
        .iter()
        .filter_map(Value::as_str)
        .map(|snake| json!({"anyOf": [{"required": [snake]}, {"required": [camel_case(snake)]}]}))
        .collect();
    if !any_of.is_empty() {
        object.insert("allOf".to_owned(), Value::Array(any_of));
    }
}

/// Multi-word keys in snake_case (`max_attempts`), not the hyphenated or dotted keys of
/// Netflix's storage configs (`wal-queue`), which have one spelling only.
fn is_snake_case_words(key: &str) -> bool {
    key.contains('_')
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn camel_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}
