//! One way every gRPC server of the platform is set up: the health service
//! (`grpc.health.v1`) and reflection in both versions grpcurl and other tools speak (v1 and
//! v1alpha), so any server can be probed and explored without the .proto files.

use tonic::transport::Server;
use tonic::transport::server::Router;
use tonic_health::server::HealthReporter;

/// Why the standard services could not be built (a descriptor set that does not decode: a
/// build defect, not an operator's).
#[derive(Debug, thiserror::Error)]
#[error("building gRPC reflection: {0}")]
pub struct ReflectionError(#[from] tonic_reflection::server::Error);

/// Why a gRPC server stopped serving, or did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Reflection(#[from] ReflectionError),
    #[error("gRPC server")]
    Transport(#[from] tonic::transport::Error),
}

/// `server` with health and reflection (v1 and v1alpha) added; add the process's own services to
/// the router and serve it. The health reporter answers SERVING for the server as a whole ("")
/// until told otherwise; a service reports its own status through it.
pub fn standard_services(mut server: Server) -> Result<(HealthReporter, Router), ReflectionError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(wal_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(wal_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let router = server
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_alpha);
    Ok((health, router))
}
