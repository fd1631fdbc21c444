//! kills: kill -9 of the producer, the consumer and the backend's broker (the Kafka broker, or
//! ElasticMQ) at random moments under load, each restarted at once, in a shuffled order.
//!
//! Conditions: the brokers are killed as processes, not as machines. Kafka's single broker
//! answers once a write is in its page cache, and ElasticMQ (H2, WRITE_DELAY=0) once the write is
//! in its database file; neither fsyncs each write, so what they acknowledged survives a process
//! kill, not a power loss.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use wal_namespaces::Backend;
use wal_testkit::{ProducerProcess, Upstream, consumer_process, namespace_json, stack};

use crate::load::{Applied, Load, namespace_dir, settle, stop_child};
use crate::table::Row;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kill {
    Producer,
    Consumer,
    Broker,
}

pub async fn drill(backend: Backend, kills_each: usize, writers: usize, seed: u64) -> Row {
    let mut rng = StdRng::seed_from_u64(seed);
    let broker = match backend {
        Backend::Kafka => "kafka",
        Backend::Sqs => "elasticmq",
    };
    let applied = Applied::Http(Upstream::start(|_| 200).await);
    let text = namespace_json(backend, 2, &applied.target(), "");
    let name = wal_namespaces::parse(&text, "drill").unwrap().name;
    let dir = namespace_dir(&[(&name, &text)]);

    let mut producer = ProducerProcess::start(&dir, Duration::from_secs(5)).await;
    let channel = Arc::new(RwLock::new(producer.channel.clone()));
    let mut consumer = consumer_process(&dir, "127.0.0.1:0");
    let prefix = format!("kills-{}", backend.to_string().to_lowercase());
    let load = Load::start(
        &name,
        &prefix,
        writers,
        Duration::from_millis(5),
        &channel,
        applied.payload(),
    );

    let mut plan = [Kill::Producer, Kill::Consumer, Kill::Broker].repeat(kills_each);
    plan.shuffle(&mut rng);
    let mut kills: HashMap<Kill, usize> = HashMap::new();
    for (i, kill) in plan.iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(rng.random_range(500..3_000))).await;
        match kill {
            Kill::Producer => {
                producer.kill();
                producer = ProducerProcess::start(&dir, Duration::from_secs(5)).await;
                *channel.write().unwrap() = producer.channel.clone();
            }
            Kill::Consumer => {
                stop_child(&mut consumer);
                consumer = consumer_process(&dir, "127.0.0.1:0");
            }
            Kill::Broker => tokio::task::spawn_blocking(move || {
                stack("kill", broker);
                stack("up", broker);
            })
            .await
            .unwrap(),
        }
        *kills.entry(*kill).or_default() += 1;
        println!(
            "  kills on {backend}: {} of {} ({kill:?}); {} writes answered so far",
            i + 1,
            plan.len(),
            load.answers.len()
        );
    }
    let last_kill = Instant::now();
    let answers = load.stop().await;
    let outcome = settle(&answers, &applied, last_kill).await;
    producer.kill();
    stop_child(&mut consumer);

    let n = |k| kills.get(&k).copied().unwrap_or(0);
    Row {
        drill: "kills",
        backend,
        faults: format!(
            "kill -9: {} producer, {} consumer, {} {broker}",
            n(Kill::Producer),
            n(Kill::Consumer),
            n(Kill::Broker)
        ),
        outcome,
        notes: String::new(),
        broken: Vec::new(),
    }
}
