//! One scenario, run on each queue backend as a test of its own.

/// Declares, for each `name => scenario`, a module `name` holding two tests, `kafka` and `sqs`,
/// that run `scenario(Backend::Kafka)` and `scenario(Backend::Sqs)`. A scenario is an
/// `async fn(Backend)` of the test file; `cargo test name` runs both, `cargo test name::sqs` one.
///
/// ```ignore
/// wal_testkit::on_each_backend! {
///     /// Doc comments and attributes go on the module.
///     never_delivers_before_deliver_at => never_delivered_before_deliver_at;
/// }
/// ```
#[macro_export]
macro_rules! on_each_backend {
    ($($(#[$attribute:meta])* $name:ident => $scenario:ident;)+) => {$(
        $(#[$attribute])*
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kafka() {
                super::$scenario($crate::Backend::Kafka).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqs() {
                super::$scenario($crate::Backend::Sqs).await;
            }
        }
    )+};
}
