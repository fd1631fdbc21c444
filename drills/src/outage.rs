//! outage: the target's database (Cassandra) killed with SIGKILL under load and kept away for
//! `outage`, then started again. The consumer holds the entries in place while it is away (no
//! retry copies, no DLQ); every write answered TRUE must reach Cassandra once it is back.

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_testkit::stack;

use crate::load::{Applied, settle, start_under_load};
use crate::table::Row;

pub async fn drill(outage: Duration, writers: usize) -> Row {
    let backend = Backend::Kafka;
    let applied = Applied::cql().await;
    let (processes, load) =
        start_under_load(backend, &applied, Vec::new(), "outage", writers).await;

    tokio::time::sleep(Duration::from_secs(10)).await;
    let before = load.answers.len();
    println!("  outage: killing Cassandra for {}s", outage.as_secs());
    tokio::task::spawn_blocking(|| stack("kill", "cassandra"))
        .await
        .unwrap();
    tokio::time::sleep(outage).await;
    let during = load.answers.len() - before;
    tokio::task::spawn_blocking(|| stack("up", "cassandra"))
        .await
        .unwrap();
    let back = Instant::now();
    println!("  outage: Cassandra answers again; writing 10 s more");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let answers = load.stop().await;
    let outcome = settle(&answers, &applied, back).await;
    processes.stop();
    Row {
        drill: "target outage",
        backend,
        faults: format!("Cassandra killed, away {} s", outage.as_secs()),
        outcome,
        notes: format!("{during} writes answered while Cassandra was away"),
        broken: Vec::new(),
    }
}
