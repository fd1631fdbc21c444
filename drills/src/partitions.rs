//! partitions: the producer and the consumer reach Kafka and Cassandra only through Toxiproxy,
//! which cuts them off under load: connections closed and refused (short cuts, several times), a
//! silent partition both ways (connections stay open, nothing flows) for minutes, added latency,
//! and one-way partitions each way. The drill itself reads Cassandra directly.
//!
//! Kafka's clients go where the broker's metadata sends them, so the broker has a listener for
//! this drill that advertises the proxy's address (`scripts/stack`: DRILL on 19094, advertised as
//! 19095). The CQL driver connects to each node at its contact point's port, so a proxy in front of
//! the single node keeps it behind the proxy. SQS is not drilled here: ElasticMQ's queue URLs name
//! its own address, which the SDK then calls directly.

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_testkit::{cql_nodes, stack};

use crate::load::{Applied, Load, settle, start_under_load};
use crate::table::Row;
use crate::toxiproxy::{Stream, Toxiproxy};

const KAFKA: &str = "wal_kafka";
const CQL: &str = "wal_cql";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// How long each kind of fault lasts.
#[derive(Debug, Clone, Copy)]
pub struct Lengths {
    pub cut: Duration,
    pub partition: Duration,
    pub other: Duration,
    pub between: Duration,
}

/// Toxiproxy in front of Kafka and Cassandra, and the environment that sends the producer and
/// the consumer through it.
async fn through_toxiproxy() -> (Toxiproxy, Vec<(&'static str, String)>) {
    // Toxiproxy, and a broker with the drill's listener (`up` restarts one started without it).
    tokio::task::spawn_blocking(|| {
        stack("up", "toxiproxy");
        stack("up", "kafka");
    })
    .await
    .unwrap();
    let proxy = Toxiproxy::new(&env_or("WAL_TOXIPROXY_URL", "http://127.0.0.1:18474"));
    let kafka_proxied = env_or("WAL_KAFKA_PROXIED", "127.0.0.1:19095");
    let kafka_listener = env_or("WAL_KAFKA_DRILL_LISTENER", "127.0.0.1:19094");
    let cql_proxied = env_or("WAL_CQL_PROXIED", "127.0.0.1:19043");
    proxy.proxy(KAFKA, &kafka_proxied, &kafka_listener).await;
    proxy.proxy(CQL, &cql_proxied, &cql_nodes()[0]).await;
    let env = vec![
        ("WAL_KAFKA_BOOTSTRAP", kafka_proxied),
        ("WAL_CQL_NODES", cql_proxied),
    ];
    (proxy, env)
}

/// Keeps the faults set for `length`, heals them all, and lets the load run `between`: when
/// they were healed.
async fn hold(proxy: &Toxiproxy, length: Duration, between: Duration) -> Instant {
    tokio::time::sleep(length).await;
    proxy.heal().await;
    let healed = Instant::now();
    tokio::time::sleep(between).await;
    healed
}

/// Cuts the processes off from Kafka and Cassandra in every way, one after another, each healed
/// before the next: when the last was healed.
async fn cut_off(proxy: &Toxiproxy, lengths: Lengths, load: &Load) -> Instant {
    let both = [KAFKA, CQL];
    let mut healed = Instant::now();
    let phase = |what: String| {
        let answered = load.answers.len();
        println!("  partitions: {what} ({answered} writes answered so far)");
    };
    for round in 1..=3 {
        phase(format!("cut {round} of 3, {} s", lengths.cut.as_secs()));
        for name in both {
            proxy.set_enabled(name, false).await;
        }
        hold(proxy, lengths.cut, lengths.between).await;
    }
    phase(format!(
        "silent partition both ways, {} s",
        lengths.partition.as_secs()
    ));
    for name in both {
        proxy.blackhole(name, Stream::Upstream).await;
        proxy.blackhole(name, Stream::Downstream).await;
    }
    hold(proxy, lengths.partition, lengths.between).await;

    phase(format!(
        "300 ms +- 100 ms added each way, {} s",
        lengths.other.as_secs()
    ));
    for name in both {
        proxy.latency(name, Stream::Upstream, 300, 100).await;
        proxy.latency(name, Stream::Downstream, 300, 100).await;
    }
    hold(proxy, lengths.other, lengths.between).await;

    for (stream, way) in [
        (Stream::Upstream, "to the servers"),
        (Stream::Downstream, "from the servers"),
    ] {
        phase(format!(
            "one way: nothing {way}, {} s",
            lengths.other.as_secs()
        ));
        for name in both {
            proxy.blackhole(name, stream).await;
        }
        healed = hold(proxy, lengths.other, lengths.between).await;
    }
    healed
}

pub async fn drill(lengths: Lengths, writers: usize) -> Row {
    let backend = Backend::Kafka;
    let (proxy, env) = through_toxiproxy().await;
    let applied = Applied::cql().await;
    let (processes, load) = start_under_load(backend, &applied, env, "partitions", writers).await;
    tokio::time::sleep(lengths.between).await;
    let healed = cut_off(&proxy, lengths, &load).await;
    let answers = load.stop().await;
    let outcome = settle(&answers, &applied, healed).await;
    processes.stop();
    Row {
        drill: "partitions",
        backend,
        faults: format!(
            "producer and consumer cut from Kafka and Cassandra: 3 cuts of {} s, a silent partition of {} s, +300 ms, one way each way ({} s each)",
            lengths.cut.as_secs(),
            lengths.partition.as_secs(),
            lengths.other.as_secs()
        ),
        outcome,
        notes: String::new(),
        broken: Vec::new(),
    }
}
