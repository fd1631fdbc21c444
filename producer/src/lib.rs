//! The producer: the platform's front door. `WriteToLog` validates a request against its
//! namespace, admits it under the namespace's limits, and answers TRUE only after the namespace's
//! queue acknowledged the entry (see proto/wal/v1/write.proto for FALSE and UNKNOWN).

pub mod admission;
pub mod destinations;
pub mod expiry;
pub mod faults;
mod finish;
mod fit;
pub mod live;
pub mod metrics;
pub mod options;
pub mod registry;
pub mod request;
pub mod resend;
pub mod server;
pub mod service;
pub mod settings;
mod status;
pub mod transactions;

pub use options::ProducerOptions;
pub use server::Producer;
pub use settings::ProducerSettings;
