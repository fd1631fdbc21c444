//! The client libraries' conformance suite (clients/conformance/README.md): the orchestrator
//! that runs a library's runner on every case against the real stack and checks the results
//! and the effects.

// A test crate: a failure to set the stage is the test's failure, said where it happens.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod case;
mod check;
mod runner;
mod stage;

/// Runs every case through `library`'s runner (`clients/<library>/conformance-runner`) and
/// panics with every failure of every case, each under its case's name and promise.
pub async fn conform(library: &str) {
    let mut cases = case::all();
    // A case that kills a producer goes last: the others need both.
    cases.sort_by_key(|(name, case)| (!case.during.is_empty(), name.clone()));
    let mut stage = stage::Stage::start(&cases).await;
    let mut report = Vec::new();
    for (name, case) in &cases {
        let plan = runner::plan(name, case, &stage);
        let failures = match runner::run(library, case, &plan, &mut stage).await {
            Ok(results) => check::check(name, case, &results, &stage).await,
            Err(failed) => vec![failed],
        };
        eprintln!(
            "conformance {library} {name}: {}",
            if failures.is_empty() { "pass" } else { "FAIL" }
        );
        if !failures.is_empty() {
            report.push(format!(
                "{name} ({})\n  - {}",
                case.promise,
                failures.join("\n  - ")
            ));
        }
    }
    assert!(
        report.is_empty(),
        "the {library} client fails {} of {} cases:\n{}",
        report.len(),
        cases.len(),
        report.join("\n")
    );
}
