//! The delivery side of the WAL: receive entries from a namespace's queues, wait until their
//! deliver-at, resolve claim checks, apply them to their target, then acknowledge, retry with
//! backoff, or dead-letter. See `consumer/README.md` for the targets' settings and payloads.

pub mod backoff;
pub mod crew;
pub mod delivery;
pub mod destination;
pub mod hold;
pub mod lanes;
pub mod metrics;
pub mod options;
pub mod pause;
pub mod replica;
pub mod service;
pub mod settings;
pub mod store;
pub mod tier;
pub mod worker;

pub use options::ConsumerOptions;
pub use service::{Consumer, ConsumerHandle};
pub use settings::ConsumerSettings;
