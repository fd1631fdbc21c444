//! two-phase: writers send small transactions (WriteTransaction: ITEMS items, staged in
//! Cassandra, then committed) while the producer, the consumer and the Kafka broker are killed
//! with -9 at random moments. The proto's promises, checked per transaction: TRUE means every item
//! is applied, in sequence order; UNKNOWN means committed, so every item is applied too (the
//! producers send the marker again by themselves); and no transaction, whatever its answer, ends
//! with only some of its items applied.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng as _;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;
use wal_namespaces::Backend;
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_testkit::{Upstream, namespace_json, transaction_of, with_durable_storage};

use crate::load::{Answer, Answers, DRAIN_LIMIT, Outcome, namespace_dir, stragglers};
use crate::processes::{Kill, Processes, dealt, kill_at_random};
use crate::table::Row;

/// Items per transaction.
const ITEMS: usize = 5;
/// Where the transactions are staged.
const STAGING: &str = "wal_txn_drill";

fn item(transaction: &str, sequence: usize) -> String {
    format!("{transaction}#{sequence}")
}

/// One writer: a transaction after another through whichever producer runs now.
async fn writer(
    namespace: String,
    prefix: String,
    processes_channel: Arc<std::sync::RwLock<tonic::transport::Channel>>,
    answers: Arc<Answers>,
    stop: CancellationToken,
) {
    let mut n = 0u64;
    while !stop.is_cancelled() {
        let id = format!("{prefix}-{n}");
        n += 1;
        let payloads = (0..ITEMS).map(|k| item(&id, k).into_bytes());
        let request = transaction_of(&namespace, &id, payloads);
        let channel = processes_channel.read().unwrap().clone();
        let mut client = TransactionsClient::new(channel);
        let answer = answers.call(id, client.write_transaction(request)).await;
        let pause = if answer == Answer::Refused { 200 } else { 5 };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// What the upstream received of the transactions.
struct Arrivals {
    /// Each transaction's items received, by sequence number.
    items: HashMap<String, HashSet<usize>>,
    /// The transactions whose items did not first arrive in sequence order.
    out_of_order: HashSet<String>,
    /// Items received again.
    duplicates: usize,
}

/// Which of each transaction's items the upstream received, and whether each transaction's
/// items first arrived in sequence order.
fn applied(upstream: &Upstream) -> Arrivals {
    let mut items: HashMap<String, HashSet<usize>> = HashMap::new();
    let mut next: HashMap<String, usize> = HashMap::new();
    let mut out_of_order = HashSet::new();
    let mut duplicates = 0;
    for body in upstream.bodies() {
        let Some((transaction, sequence)) = body.rsplit_once('#') else {
            continue;
        };
        let Ok(sequence) = sequence.parse::<usize>() else {
            continue;
        };
        if !items
            .entry(transaction.to_owned())
            .or_default()
            .insert(sequence)
        {
            duplicates += 1;
            continue;
        }
        let expected = next.entry(transaction.to_owned()).or_default();
        if sequence != *expected {
            out_of_order.insert(transaction.to_owned());
        }
        *expected = sequence + 1;
    }
    Arrivals {
        items,
        out_of_order,
        duplicates,
    }
}

/// Starts `writers` writers on the namespace `name`, each a transaction after another until
/// `stop`.
fn start_writers(
    name: &str,
    writers: usize,
    processes: &Processes,
    answers: &Arc<Answers>,
    stop: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..writers)
        .map(|w| {
            tokio::spawn(writer(
                name.to_owned(),
                format!("txn-w{w}"),
                Arc::clone(&processes.channel),
                Arc::clone(answers),
                stop.clone(),
            ))
        })
        .collect()
}

/// How long after `last_kill` every committed transaction (TRUE or UNKNOWN) had all its items
/// applied; None if not within [`DRAIN_LIMIT`].
async fn committed_applied(
    upstream: &Upstream,
    answers: &Answers,
    last_kill: Instant,
) -> Option<Duration> {
    // TRUE and UNKNOWN transactions are committed: all of their items must arrive.
    let committed: Vec<String> = [Answer::True, Answer::Unknown]
        .iter()
        .flat_map(|a| answers.with(*a))
        .collect();
    while last_kill.elapsed() < DRAIN_LIMIT {
        let Arrivals { items, .. } = applied(upstream);
        if committed
            .iter()
            .all(|t| items.get(t).is_some_and(|s| s.len() == ITEMS))
        {
            return Some(last_kill.elapsed());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    None
}

/// What the upstream received once the producers' sweeps had time to queue the stragglers.
async fn settled(upstream: &Upstream) -> Arrivals {
    // A refused or unanswered commit may still be queued by a producer's sweep (every 30 s, for
    // transactions committing for over 10 s): two sweeps' time (a full run's) before counting.
    // A transaction being applied at that moment shows some of its items, so partly applied
    // counts only if it stays so for 60 s more.
    tokio::time::sleep(stragglers() * 2).await;
    let settled = Instant::now();
    loop {
        let arrivals = applied(upstream);
        let partly = arrivals.items.values().any(|s| s.len() < ITEMS);
        if !partly || settled.elapsed() > Duration::from_secs(60) {
            break arrivals;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

pub async fn drill(kills_each: usize, writers: usize, seed: u64) -> Row {
    let mut rng = StdRng::seed_from_u64(seed);
    let upstream = Upstream::start(|_| 200).await;
    let text = with_durable_storage(
        &namespace_json(Backend::Kafka, 2, &upstream.target(), ""),
        STAGING,
    );
    let name = wal_namespaces::parse(&text, "drill").unwrap().name;
    let mut processes = Processes::start(namespace_dir(&[(&name, &text)])).await;
    let answers = Arc::new(Answers::default());
    let stop = CancellationToken::new();
    let tasks = start_writers(&name, writers, &processes, &answers, &stop);
    let kinds = [Kill::Producer, Kill::Consumer, Kill::Broker("kafka")];
    let kills = kill_at_random(&mut processes, &kinds, kills_each, &mut rng, || {
        format!("{} transactions answered so far", answers.len())
    })
    .await;
    let last_kill = Instant::now();
    stop.cancel();
    for task in tasks {
        task.await.unwrap();
    }
    let recovered = committed_applied(&upstream, &answers, last_kill).await;
    let arrivals = settled(&upstream).await;
    processes.stop();
    row(&answers, &arrivals, dealt(&kinds, &kills), recovered)
}

/// The drill's row: what the transactions came to against the proto's promises.
fn row(answers: &Answers, arrivals: &Arrivals, faults: String, recovered: Option<Duration>) -> Row {
    let Arrivals {
        items,
        out_of_order,
        duplicates,
    } = arrivals;
    let count = |t: &String| items.get(t).map_or(0, HashSet::len);
    let lost = |answer| {
        answers
            .with(answer)
            .iter()
            .filter(|t| count(t) < ITEMS)
            .count()
    };
    let partial: Vec<&String> = items
        .keys()
        .filter(|t| (1..ITEMS).contains(&count(t)))
        .collect();
    let true_out_of_order = answers
        .with(Answer::True)
        .iter()
        .filter(|t| out_of_order.contains(*t))
        .count();
    let unknown_lost = lost(Answer::Unknown);
    Row {
        drill: "two-phase kills",
        backend: Backend::Kafka,
        faults,
        outcome: Outcome {
            reasons: answers.top_reasons(3),
            written: answers.len(),
            answered: answers.tally(),
            true_lost: lost(Answer::True),
            false_applied: [Answer::False, Answer::Shed]
                .iter()
                .flat_map(|a| answers.with(*a))
                .collect::<Vec<_>>()
                .iter()
                .filter(|t| count(t) > 0)
                .count(),
            duplicates: Some(*duplicates),
            recovered,
        },
        notes: format!(
            "transactions of {ITEMS} items; UNKNOWN (committed) not applied whole: {unknown_lost}; partly applied: {}; TRUE out of order: {true_out_of_order}",
            partial.len()
        ),
        broken: broken(unknown_lost, &partial, true_out_of_order),
    }
}

/// The proto's promises that did not hold: committed transactions applied whole, none partly
/// applied, TRUE ones in sequence order.
fn broken(unknown_lost: usize, partial: &[&String], true_out_of_order: usize) -> Vec<String> {
    let mut broken = Vec::new();
    if unknown_lost > 0 {
        broken.push(format!(
            "{unknown_lost} transactions answered UNKNOWN (committed) were not applied whole"
        ));
    }
    if !partial.is_empty() {
        broken.push(format!(
            "{} transactions ended with only some items applied (one: {})",
            partial.len(),
            partial[0]
        ));
    }
    if true_out_of_order > 0 {
        broken.push(format!(
            "{true_out_of_order} TRUE transactions had items applied out of sequence order"
        ));
    }
    broken
}
