//! Every client library on every case. `WAL_CONFORMANCE_LIBRARIES` (a comma-separated list)
//! narrows a run by hand to the libraries named; CI never sets it.

async fn library(name: &str) {
    let wanted = std::env::var("WAL_CONFORMANCE_LIBRARIES").unwrap_or_default();
    if !wanted.is_empty() && !wanted.split(',').any(|l| l.trim() == name) {
        eprintln!("{name}: not in WAL_CONFORMANCE_LIBRARIES={wanted}");
        return;
    }
    wal_client_conformance::conform(name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust() {
    library("rust").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go() {
    library("go").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java() {
    library("java").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python() {
    library("python").await;
}
