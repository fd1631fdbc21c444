//! The control plane: the registry of namespace configs (every change a new version, kept), the
//! rules that refuse updates which would strand data, and the provisioning of the queues, DLQs
//! and delay tiers a namespace names. `walctl` is its command line.

pub mod changes;
pub mod operations;
pub mod options;
pub mod provision;
pub mod server;
pub mod service;
pub mod store;
pub mod watch;

pub use server::{ControlPlane, ControlPlaneSettings, StartError};
