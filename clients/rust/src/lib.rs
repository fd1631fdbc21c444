//! The Rust client of the write-ahead-log platform.
//!
//! ```no_run
//! # async fn first_write() -> Result<(), wal_client::Error> {
//! use wal_client::{Client, Outcome, Settings, Write};
//!
//! let client = Client::new(Settings::new(["127.0.0.1:50051"]))?;
//! let written = client.write(Write::new("orders", b"{\"id\": 1}".to_vec()).key("order-1")).await?;
//! match written.outcome {
//!     Outcome::True => println!("stored as {} after {} attempts", written.entry_id, written.attempts),
//!     Outcome::False => println!("not stored: {}", written.message), // yours to retry or not
//!     Outcome::Unknown => println!("maybe stored; write it again with id {}", written.entry_id),
//! }
//! # Ok(()) }
//! ```
//!
//! Every write gets its idempotency id before its first attempt and keeps it across retries;
//! UNKNOWN, lost calls and RESOURCE_EXHAUSTED are retried with backoff until TRUE, FALSE or the
//! deadline; refusals are [`Error::Refused`] naming the field. `clients/BEHAVIOUR.md` is the
//! behaviour every library of the platform implements.

mod answer;
mod batcher;
mod client;
mod error;
mod producers;
mod retry;
mod settings;
mod transaction;
mod write;

pub use client::Client;
pub use error::Error;
pub use settings::{Batching, Settings, Tls};
pub use tonic::Code;
pub use transaction::Item;
pub use wal_proto::v1::Target;
pub use write::{Applied, Outcome, Write, Written};
