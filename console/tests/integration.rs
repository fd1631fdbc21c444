//! The console's integration tests as one program (`autotests = false` in Cargo.toml).

mod browser;
mod consumers;
