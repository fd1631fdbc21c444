//! How a failed SendMessage is answered: FALSE only where nothing can have been stored.

use std::time::Duration;

use super::*;

/// A SendMessage to `endpoint` that fails, and whether it counts as certainly not stored.
async fn send_to(endpoint: &str) -> bool {
    let backend = SqsBackend::new(SqsSettings::local(endpoint)).await;
    let request = backend
        .client()
        .send_message()
        .queue_url(format!("{endpoint}/000000000000/q"))
        .message_body("x")
        .customize()
        .config_override(
            aws_sdk_sqs::config::Config::builder().retry_config(RetryConfig::disabled()),
        )
        .send();
    let error = tokio::time::timeout(Duration::from_secs(30), request)
        .await
        .expect("an answer within 30 s")
        .expect_err("nothing listens there to store it");
    certainly_not_stored(&error)
}

#[tokio::test]
async fn a_refused_connection_stores_nothing() {
    // A port nobody listens on: bound, its address taken, and closed again.
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    assert!(send_to(&format!("http://{address}")).await);
}

#[tokio::test]
async fn a_connection_dropped_after_the_request_may_have_stored_it() {
    // Accepts, reads the request, and hangs up without an answer: SQS may have stored it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt as _;
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buffer = [0u8; 4096];
            let _ = socket.read(&mut buffer).await;
            drop(socket);
        }
    });
    assert!(!send_to(&format!("http://{address}")).await);
}
