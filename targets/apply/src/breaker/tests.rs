use super::*;

/// A breaker of `endpoint` opened by a failure saying `reason`, and a shutdown token.
fn opened(endpoint: &str, reason: &str) -> (Breaker, CancellationToken) {
    let breaker = Breaker::new(endpoint);
    breaker.unavailable(Pass::Free, reason);
    (breaker, CancellationToken::new())
}

#[tokio::test(start_paused = true)]
async fn a_closed_breaker_lets_every_apply_through() {
    let breaker = Breaker::new("cql/a");
    let shutdown = CancellationToken::new();
    assert_eq!(breaker.admit(&shutdown).await, Some(Pass::Free));
    breaker.answered();
    assert!(!breaker.is_open());
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_holds_applies_and_lets_one_probe_through_at_a_time() {
    let breaker = Arc::new(Breaker::new("cql/a"));
    let shutdown = CancellationToken::new();
    breaker.unavailable(Pass::Free, "connection refused");
    assert!(breaker.is_open());
    let started = Instant::now();
    // The first probe waits for the first back-off.
    assert_eq!(breaker.admit(&shutdown).await, Some(Pass::Probe));
    assert_eq!(started.elapsed(), PROBE_FIRST);
    // While the probe is out, a second apply waits for its outcome.
    let second = tokio::spawn({
        let (breaker, shutdown) = (Arc::clone(&breaker), shutdown.clone());
        async move { breaker.admit(&shutdown).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!second.is_finished());
    assert_eq!(breaker.report().map(|r| r.held), Some(1));
    // The probe failed: the waiting apply becomes the next probe after a longer back-off.
    let failed = Instant::now();
    breaker.unavailable(Pass::Probe, "connection refused");
    assert_eq!(second.await.unwrap(), Some(Pass::Probe));
    assert_eq!(failed.elapsed(), PROBE_FIRST * 2);
    // It succeeded: the breaker closes and lets all through.
    breaker.answered();
    assert_eq!(breaker.admit(&shutdown).await, Some(Pass::Free));
    assert_eq!(breaker.report(), None);
}

#[tokio::test(start_paused = true)]
async fn probes_back_off_up_to_the_longest_wait() {
    let (breaker, shutdown) = opened("http/x", "503");
    let mut waits = Vec::new();
    for _ in 0..8 {
        let asked = Instant::now();
        assert_eq!(breaker.admit(&shutdown).await, Some(Pass::Probe));
        waits.push(asked.elapsed().as_millis());
        breaker.unavailable(Pass::Probe, "503");
    }
    assert_eq!(waits, [250, 500, 1000, 2000, 2000, 2000, 2000, 2000]);
}

#[tokio::test(start_paused = true)]
async fn a_probe_that_never_reports_does_not_hold_the_breaker_for_good() {
    let (breaker, shutdown) = opened("cql/a", "refused");
    assert_eq!(breaker.admit(&shutdown).await, Some(Pass::Probe));
    let asked = Instant::now();
    assert_eq!(breaker.admit(&shutdown).await, Some(Pass::Probe));
    assert_eq!(asked.elapsed(), PROBE_LEASE);
}

#[tokio::test(start_paused = true)]
async fn waiting_applies_leave_at_shutdown() {
    let (breaker, shutdown) = opened("cache/x", "refused");
    let _probe = breaker.admit(&shutdown).await;
    shutdown.cancel();
    assert_eq!(breaker.admit(&shutdown).await, None);
    assert_eq!(breaker.report().map(|r| r.held), Some(0));
}

#[test]
fn breakers_are_one_per_endpoint() {
    let breakers = Breakers::default();
    let a = breakers.get("cql/a").unwrap();
    assert!(Arc::ptr_eq(&a, &breakers.get("cql/a").unwrap()));
    a.unavailable(Pass::Free, "refused");
    let open = breakers.open();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].endpoint, "cql/a");
    assert!(breakers.get("cql/b").unwrap().report().is_none());
}

#[tokio::test(start_paused = true)]
async fn a_probe_given_back_unused_passes_its_turn_at_once() {
    let (breaker, shutdown) = opened("cql/a", "connection refused");
    let breaker = Arc::new(breaker);
    assert_eq!(breaker.admit(&shutdown).await, Some(Pass::Probe));
    let next = tokio::spawn({
        let (breaker, shutdown) = (Arc::clone(&breaker), shutdown.clone());
        async move { breaker.admit(&shutdown).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!next.is_finished(), "one probe at a time");
    let given_back = Instant::now();
    breaker.unused(Pass::Probe);
    assert_eq!(next.await.unwrap(), Some(Pass::Probe));
    assert!(
        given_back.elapsed() < PROBE_MAX,
        "waited for the probe's lease"
    );
    // A free pass given back changes nothing.
    breaker.unused(Pass::Free);
    assert!(breaker.is_open());
}
