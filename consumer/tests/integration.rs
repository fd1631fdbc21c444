//! The crate's integration tests as one program: each file beside this one is a module of it
//! (`autotests = false` in Cargo.toml), so a build links one test binary, not one per file. The
//! outage programs (files named `*outage*`) stay programs of their own, declared in Cargo.toml:
//! they stop services every test shares, and `cargo test` runs programs one at a time.
//! scripts/test checks that every file here is one or the other.

mod archive;
mod cancel;
mod clusters;
mod consumer_crash;
mod delays;
mod delivery_rules;
mod end_to_end;
mod health;
mod pause;
mod rebalance;
mod reload;
mod replication_crash;
mod secured_cql;
mod secured_kafka;
mod several_stores;
mod simulation;
mod traces;
mod transaction_crash;
