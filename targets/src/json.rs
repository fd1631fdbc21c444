//! Strict JSON parsing for target settings and payloads, with errors that name where the input
//! was wrong.

use serde::de::DeserializeOwned;

/// What was wrong with a JSON document: the path to the bad part (`mutations[0].put.row`, `.`
/// for the document itself) and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    pub path: String,
    pub reason: String,
}

impl JsonError {
    pub fn at(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Parses `json` into `T`. The common case (valid input) takes serde_json's fast path; only a
/// failure is parsed again with path tracking, to say where it failed.
pub fn parse<T: DeserializeOwned>(json: &[u8]) -> Result<T, JsonError> {
    serde_json::from_slice(json).map_err(|_| {
        let mut deserializer = serde_json::Deserializer::from_slice(json);
        match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
            Err(e) => {
                // `?` is the parser's "somewhere in here", for a document that is not JSON.
                let path = match e.path().to_string() {
                    unknown if unknown == "?" => ".".to_owned(),
                    path => path,
                };
                JsonError::at(path, e.inner().to_string())
            }
            // Both parsers read the same grammar; this is unreachable in practice.
            Ok(_) => JsonError::at(".", "invalid JSON"),
        }
    })
}

/// serde_json ends its messages with "at line L column C": for settings the path says where, and
/// in settings made from a config's field the position would point into that copy, not the file.
/// Payload errors keep it: in a large payload it finds the spot.
pub(crate) fn without_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at)
            if message[at + 9..]
                .split(" column ")
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            message[..at].to_owned()
        }
        _ => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        inner: Vec<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn errors_name_the_path_and_the_problem() {
        let error = parse::<Outer>(br#"{"inner": [{"n": 1}, {"n": "two"}]}"#).unwrap_err();
        assert_eq!(error.path, "inner[1].n");
        assert!(
            error
                .reason
                .starts_with(r#"invalid type: string "two", expected u32 at line 1"#)
        );
        assert_eq!(
            without_position(&error.reason),
            r#"invalid type: string "two", expected u32"#
        );
        assert!(parse::<Outer>(br#"{"inner": [{"n": 1}]}"#).is_ok());
    }
}
