//! What every binary of the platform runs on: logs and metrics ([`process`]), the gRPC server's
//! standard services, TLS and client certificates ([`tls`]), who may call what
//! ([`authorize`]), secrets kept out of configs and logs ([`secret`]), and a dependency's
//! absence told once rather than per failure ([`outage`], with the broker metrics it keeps in
//! [`metrics`]), the error a failure was born of ([`cause`]), and a write's trace through the
//! processes ([`trace_context`]).

pub mod authorize;
pub mod cause;
pub mod exposition;
pub mod metrics;
pub mod outage;
pub mod process;
pub mod secret;
pub mod tls;
pub mod trace_context;
