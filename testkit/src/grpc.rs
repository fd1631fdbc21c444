//! What every gRPC server of the platform answers besides its own service: health, and
//! reflection in both versions tools speak.

use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// Asserts that a call was refused with `code` and a message naming each of `names`: a refusal
/// must say what was wrong, not only that something was.
#[track_caller]
pub fn assert_refused(status: &tonic::Status, code: tonic::Code, names: &[&str]) {
    assert_eq!(status.code(), code, "{status:?}");
    for name in names {
        assert!(
            status.message().contains(name),
            "the refusal names {name:?}: {}",
            status.message()
        );
    }
}

/// The field a refusal names in its `google.rpc.BadRequest` detail, which client libraries read
/// to type the error; empty when it carries none.
pub fn refused_field(status: &tonic::Status) -> String {
    use tonic_types::StatusExt as _;
    status
        .get_details_bad_request()
        .and_then(|bad| bad.field_violations.into_iter().next())
        .map(|violation| violation.field)
        .unwrap_or_default()
}

/// The health service's answer for `service` ("" for the server as a whole).
pub async fn health_status(channel: &Channel, service: &str) -> ServingStatus {
    let check = HealthCheckRequest {
        service: service.to_owned(),
    };
    HealthClient::new(channel.clone())
        .check(check)
        .await
        .unwrap_or_else(|e| panic!("health check of '{service}': {e}"))
        .into_inner()
        .status()
}

/// The services reflection v1 lists, and those v1alpha lists: grpcurl speaks either.
pub async fn reflected_services(channel: &Channel) -> (Vec<String>, Vec<String>) {
    (
        list_services!(v1, channel, "reflection v1"),
        list_services!(v1alpha, channel, "reflection v1alpha"),
    )
}

/// Asks one reflection version for the services it lists: the two versions are the same
/// protocol in two packages, so one body serves both.
macro_rules! list_services {
    ($version:ident, $channel:expr, $what:literal) => {{
        use tonic_reflection::pb::$version::ServerReflectionRequest;
        use tonic_reflection::pb::$version::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::$version::server_reflection_request::MessageRequest;
        use tonic_reflection::pb::$version::server_reflection_response::MessageResponse;

        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut answers = ServerReflectionClient::new($channel.clone())
            .server_reflection_info(futures::stream::iter([request]))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", $what))
            .into_inner();
        let answer = answers.message().await.unwrap().unwrap();
        let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
            panic!("{} answered {answer:?}", $what)
        };
        list.service
            .into_iter()
            .map(|s| s.name)
            .collect::<Vec<String>>()
    }};
}
use list_services;
