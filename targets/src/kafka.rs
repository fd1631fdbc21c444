//! The kafka kind: publishes the payload to a topic, as is. Settings: `{"topic": "orders"}`.

use serde::Deserialize;

use crate::json::JsonError;
use crate::{Kind, Settings};

/// Kafka's longest topic name.
pub const TOPIC_MAX: usize = 249;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaTopicSettings {
    pub topic: String,
}

impl Settings for KafkaTopicSettings {
    const KIND: Kind = Kind::Kafka;

    fn check(&self) -> Result<(), JsonError> {
        if is_topic_name(&self.topic) {
            Ok(())
        } else {
            Err(JsonError::at(
                "topic",
                format!(
                    "{:?} is not a Kafka topic name; expected 1 to {TOPIC_MAX} of [a-zA-Z0-9._-]",
                    self.topic
                ),
            ))
        }
    }
}

/// Whether Kafka accepts `name` as a topic name.
pub fn is_topic_name(name: &str) -> bool {
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    !name.is_empty()
        && name.len() <= TOPIC_MAX
        && name.chars().all(legal)
        && name != "."
        && name != ".."
}
