//! The platform's public API (`WriteToLog`) and the entry envelope, generated from `proto/wal/v1`.

/// Version 1 of the wire format: the `WriteAheadLog` service and the entry envelope.
pub mod v1 {
    #![allow(missing_debug_implementations, clippy::all)]
    tonic::include_proto!("wal.v1");
}

/// The encoded `FileDescriptorSet` of every .proto file, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("wal_descriptor");
