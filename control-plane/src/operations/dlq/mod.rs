//! A namespace's dead letters: reading its DLQs, judging which entries an operation takes, and
//! redriving them. The control plane's Operations service runs these for operators (authorized,
//! audited, one redrive of a namespace at a time); `walctl dlq --direct` runs them itself, for a
//! control plane that is down.

pub mod filter;
pub mod history;
pub mod list;
pub mod purge;
pub mod redrive;
pub mod source;

pub use filter::{Class, Filter, Verdict};
pub use source::{DeadLetters, Found};

#[derive(Debug, thiserror::Error)]
pub enum DlqError {
    /// The request or the cluster map cannot be served (a DLQ on a cluster the map lacks).
    #[error("{0}")]
    Usage(String),
    /// A broker failed or could not be reached; running again continues.
    #[error("{0}")]
    Broker(String),
    /// Stopped before the end (shutdown, or cancelled); the progress is saved.
    #[error("stopped before the end; the progress is saved, and redriving again continues")]
    Stopped,
}
