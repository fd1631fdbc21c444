//! The namespace model: a namespace's queues, DLQs, retry policy, delay limits, payload limit,
//! rate limit, default target and durable storage.
//!
//! Configs come as JSON, one namespace per file, in the shapes of Netflix's published WAL configs
//! (camelCase or snake_case) plus the platform's own settings; [`file`] documents every field.
//! Parsing is strict: an unknown field, a wrong type, an out-of-range number, an empty queue list
//! or a mismatched DLQ list is refused with an error naming the file, the field path and what was
//! expected. Each queue gets a DLQ, `<queue>-dlq`, when the config names none.

mod access;
mod error;
pub mod feed;
pub mod file;
mod load;
mod model;
mod validate;

pub use access::{Access, Action, Grant};
pub use error::{ConfigError, ConfigErrors};
pub use load::{ConfigText, load_dir, load_file, parse, parse_all, parse_stored, read_dir};
pub use model::*;
pub use validate::{KAFKA_TOPIC_MAX, MAX_DESTINATIONS};

mod schema;

pub use schema::json_schema;
