//! `wal-writer`: the receiving end of cross-region replication, run in every region. Other
//! regions' consumers send it the entries of replicated namespaces (`ApplyReplicated`, see
//! `proto/wal/v1/writer.proto`); it applies each to this region's cache or CQL table with the
//! consumer's own targets, and answers one outcome per entry. It writes nothing to a WAL
//! namespace, and refuses an entry that started in its own region, so two regions replicating
//! to each other cannot loop.

pub mod metrics;
pub mod options;
pub mod service;

pub use options::WriterOptions;
pub use service::{RegionWriterService, WriterSettings};
