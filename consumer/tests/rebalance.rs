//! Several consumers of one namespace share its Kafka queues through a consumer group. A consumer
//! holding a queue in place (its target unavailable) takes no new entries, but it must still
//! take part in its group's rebalances: Kafka's group waits for every member to rejoin, so a
//! member that stopped serving its group would stall every consumer of the queue for as long as
//! the target is down.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_testkit::{
    TestProducer, Upstream, eventually, group_state, namespace_with_target, start_consumer, write,
    write_true,
};

const LIMIT: Duration = Duration::from_secs(60);
const ENTRIES: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_holding_for_an_unavailable_target_still_lets_its_group_rebalance() {
    let upstream = Upstream::broken(503).await;
    let namespace = namespace_with_target(Backend::Kafka, 1, &upstream.target(), "");
    let group = format!("wal-consumer.{}", namespace.queues[0].name);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let first = start_consumer(vec![namespace.clone()]).await;
    for i in 0..ENTRIES {
        let payload = format!("entry {i}");
        write_true(&producer.client, write(&namespace.name, payload.as_bytes())).await;
    }
    // The target answered 503: the first consumer holds the queue (an unavailable target opens
    // the breaker at once: target_outage.rs). Before the keeper, this test failed right here
    // below, which showed the hold in effect: the group waited for the held member.
    eventually(LIMIT, "the first consumer to try the target", || async {
        (!upstream.received().is_empty()).then_some(())
    })
    .await;
    eventually(LIMIT, "the group to settle with one member", || async {
        (group_state(&group) == ("Stable".to_owned(), 1)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let joined = Instant::now();
    let second = start_consumer(vec![namespace.clone()]).await;
    eventually(LIMIT, "the group to rebalance to both members", || async {
        (group_state(&group) == ("Stable".to_owned(), 2)).then_some(())
    })
    .await;
    println!(
        "the group rebalanced to two members in {:.1} s while the first held its queue",
        joined.elapsed().as_secs_f64()
    );

    upstream.mend();
    // Delivered: answered 200, which only the mended upstream does. (Not "received after the
    // mend": a request received just before it may be answered after it, with 200, and is
    // then never sent again.)
    eventually(LIMIT, "every entry delivered", || async {
        let received = upstream.received();
        (0..ENTRIES)
            .all(|i| {
                let body = format!("entry {i}");
                received
                    .iter()
                    .any(|r| r.status == 200 && r.body == body.as_bytes())
            })
            .then_some(())
    })
    .await;
    first.shutdown().await;
    second.shutdown().await;
    producer.shutdown().await;
}
