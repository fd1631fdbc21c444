//! What the platform's binaries share about running as a process.

/// Completes on Ctrl-C or SIGTERM (what Kubernetes sends before it kills a pod), so a binary can
/// start its graceful shutdown.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
