//! The crate's integration tests as one program, as in every crate of the workspace (each file
//! beside this one is a module of it; scripts/test checks that).

mod libraries;
