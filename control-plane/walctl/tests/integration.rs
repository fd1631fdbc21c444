//! The crate's integration tests as one program: each file beside this one is a module of it
//! (`autotests = false` in Cargo.toml), so a build links one test binary, not one per file. The
//! outage programs (files named `*outage*`) stay programs of their own, declared in Cargo.toml:
//! they stop services every test shares, and `cargo test` runs programs one at a time.
//! scripts/test checks that every file here is one or the other.

mod destinations;
mod dlq;
mod index;
mod operations;
mod purge;
mod redrive;
mod replay;
mod replay_through;
mod replication;
mod transactions;
mod walctl;
