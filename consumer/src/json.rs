//! Strict JSON parsing for target settings and payloads, with errors that name where the input
//! was wrong.

use serde::de::DeserializeOwned;

/// What was wrong with a JSON document: the path to the bad part (`mutations[0].put.row`) and
/// what the parser expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    pub path: String,
    pub reason: String,
}

/// Parses `json` into `T`. The common case (valid input) takes serde_json's fast path; only a
/// failure is parsed again with path tracking, to say where it failed.
pub fn parse<T: DeserializeOwned>(json: &[u8]) -> Result<T, JsonError> {
    serde_json::from_slice(json).map_err(|_| {
        let mut deserializer = serde_json::Deserializer::from_slice(json);
        match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
            Err(e) => JsonError {
                path: e.path().to_string(),
                reason: e.inner().to_string(),
            },
            // Both parsers read the same grammar; this is unreachable in practice.
            Ok(_) => JsonError {
                path: ".".to_owned(),
                reason: "invalid JSON".to_owned(),
            },
        }
    })
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
        assert!(error.reason.contains("expected u32"), "{}", error.reason);
        assert!(parse::<Outer>(br#"{"inner": [{"n": 1}]}"#).is_ok());
    }
}
