//! Where the platform's clusters are: the cluster map ([`ClusterMap`]: what the cluster names in
//! namespace configs stand for), the broker and CQL flags that build one ([`flags`]), and what is
//! opened from it: a namespace's queue clients ([`backends`]) and CQL sessions ([`cql`]).

pub mod backends;
pub mod cql;
pub mod flags;
mod map;

pub use backends::{Backends, ConnectError};
pub use map::*;
