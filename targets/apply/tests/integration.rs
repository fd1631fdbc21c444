//! The crate's integration tests as one program: each file beside this one is a module of it
//! (`autotests = false` in Cargo.toml), so a build links one test binary, not one per file.
//! scripts/test checks that every file here is one.

mod index;
mod targets;
