//! A start-up that waits on other services says so while it waits: a process that has not bound
//! its port after a minute, with nothing in its log, leaves an operator (or a test's failure
//! message) guessing which of its backends is slow.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a start-up still under way is reported.
const EVERY: Duration = Duration::from_secs(10);

/// Runs `start`, logging a warning naming `what` it waits on every 10 s until it completes.
pub async fn reporting_slow<F: Future>(binary: &str, what: &str, start: F) -> F::Output {
    let began = Instant::now();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
    // A starved runtime says it once when it wakes, not once for every tick it missed.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(start);
    loop {
        tokio::select! {
            done = &mut start => return done,
            _ = ticks.tick() => tracing::warn!(
                waited_s = began.elapsed().as_secs(),
                "{binary} is still starting: {what}; it answers nothing until this is done"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_quick_start_returns_its_value() {
        let value = reporting_slow("test", "nothing", async { 7 }).await;
        assert_eq!(value, 7);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_start_still_completes() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(25)).await;
            "done"
        };
        assert_eq!(reporting_slow("test", "a backend", slow).await, "done");
    }
}
