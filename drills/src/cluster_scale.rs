//! cluster-scale: the consumers of one namespace scaled 3 -> 5 -> 2 under load on the clustered
//! stack, as an autoscaler or an operator would (new processes started; surplus ones stopped
//! with SIGTERM, so they hand back their partitions), with each step's rebalance timed:
//! - once per rebalance protocol: librdkafka's eager default (`range,roundrobin`: every member
//!   hands back every partition, and the queue delivers nothing until the group is whole again)
//!   and `cooperative-sticky` (only the partitions that move stop), set through the cluster
//!   map's `client` properties;
//! - once more with the target down (answering 503), so every consumer holds its entries in
//!   place while the group changes around it (eager: the platform sets no strategy, and
//!   cooperative measured no shorter pause; see the README's row).
//!
//! What it shows, per step: how long after the step each queue's group was stable with the new
//! number of members ("rebalanced"; with cooperative-sticky the group may show stable between
//! its two rounds, so this can end early: the delivery pause is the figure to compare), and the longest a write answered TRUE in the window after
//! the step waited for its delivery ("delivery pause"), beside the longest in the steady window
//! before the first step. Goal: both under 10 s. Nothing lost; while held, nothing delivered
//! and nothing dead-lettered, and every entry delivered once the target serves again.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use wal_namespaces::Backend;
use wal_testkit::{Upstream, consumer_process_with_env, group_state, kafka_log, terminate};

use crate::cluster::{
    CONSUMERS, Fleet, Writers, not_on_the_clustered_stack, on_the_clustered_stack,
};
use crate::load::{Applied, Outcome, body, namespace_dir, settle};
use crate::processes::{STOP_LIMIT, reap_within};
use crate::table::Row;

/// The steps, after the fleet's three consumers.
const STEPS: [usize; 2] = [5, 2];
/// How long a group may take to be stable with its new members before the step counts as
/// never rebalanced.
const REBALANCE_LIMIT: Duration = Duration::from_secs(120);
/// The goal for a rebalance and for a delivery pause.
const GOAL: Duration = Duration::from_secs(10);

/// How a run of the drill is shaped.
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    /// Load before the first step: the delivery latency to compare against.
    pub steady: Duration,
    /// Load after each step, whose writes' delivery latency is the step's pause.
    pub step: Duration,
}

/// The rebalance protocols measured; the first is librdkafka's default.
const PROTOCOLS: [(&str, &str); 2] = [
    ("eager", "range,roundrobin"),
    ("cooperative", "cooperative-sticky"),
];

pub async fn drill(writers: usize, windows: Windows) -> Vec<Row> {
    if !on_the_clustered_stack() {
        return vec![not_on_the_clustered_stack("cluster-scale")];
    }
    let mut rows = Vec::new();
    for (name, strategy) in PROTOCOLS {
        rows.push(under_load(name, strategy, writers, windows).await);
    }
    // Held, with the platform's own strategy (librdkafka's default): the one production runs.
    rows.push(while_held(PROTOCOLS[0].1, writers, windows).await);
    rows
}

/// A cluster map for the consumers: the clustered stack's brokers and copies (from `scripts/stack
/// --cluster env`), with `strategy` as the consumer groups' assignment strategy.
fn cluster_map(strategy: &str) -> (&'static str, String) {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let number = |name: &str| var(name).parse::<i32>().ok();
    let map = serde_json::json!({"kafka": {"default": "default", "clusters": {"default": {
        "bootstrap_servers": var("WAL_KAFKA_BOOTSTRAP"),
        "replication_factor": number("WAL_KAFKA_REPLICATION_FACTOR"),
        "min_insync_replicas": number("WAL_KAFKA_MIN_INSYNC_REPLICAS"),
        "client": {"partition.assignment.strategy": strategy},
    }}}});
    // Beside the namespaces' folder: every file in it is read as a namespace.
    let path = std::env::temp_dir().join(format!("{}.json", wal_testkit::unique("clusters")));
    std::fs::write(&path, map.to_string()).expect("the consumers' cluster map");
    ("WAL_CLUSTERS", path.display().to_string())
}

/// The namespace (two queues, no delays) on the clustered stack, a fleet serving it whose
/// consumers use `strategy`, and its queues' consumer groups.
async fn start(target: &str, strategy: &str) -> (String, Fleet, Vec<String>, Vec<String>) {
    let text = wal_testkit::namespace_json(Backend::Kafka, 2, target, "");
    let namespace = wal_namespaces::parse(&text, "drill").unwrap();
    let dir = namespace_dir(&[(&namespace.name, &text)]);
    let env = vec![cluster_map(strategy)];
    let fleet = Fleet::start_with(dir, env).await;
    let groups = namespace
        .queues
        .iter()
        .map(|q| format!("wal-consumer.{}", q.name))
        .collect();
    let dlqs = namespace.queues.iter().map(|q| q.dlq.clone()).collect();
    (namespace.name, fleet, groups, dlqs)
}

/// Scales the fleet's consumers to `n`: new processes started, surplus ones (the oldest) sent
/// SIGTERM at once and waited for. Returns how many of those had to be killed.
async fn scale_to(fleet: &mut Fleet, n: usize) -> usize {
    while fleet.consumers.len() < n {
        fleet
            .consumers
            .push(consumer_process_with_env(&fleet.dir, &fleet.consumer_env));
    }
    let surplus: Vec<_> = fleet
        .consumers
        .drain(..fleet.consumers.len().saturating_sub(n))
        .collect();
    let since = Instant::now();
    for child in &surplus {
        terminate(child);
    }
    let mut killed = 0;
    for child in surplus {
        killed += usize::from(!reap_within(child, since).await);
    }
    killed
}

/// How long after `since` every group of `groups` was stable with `members` members; None if
/// not within [`REBALANCE_LIMIT`].
async fn rebalanced(groups: &[String], members: usize, since: Instant) -> Option<Duration> {
    while since.elapsed() < REBALANCE_LIMIT {
        let groups = groups.to_vec();
        let stable = tokio::task::spawn_blocking(move || {
            groups
                .iter()
                .all(|g| group_state(g) == ("Stable".to_owned(), members))
        })
        .await
        .unwrap();
        if stable {
            return Some(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// One scaling step's measurements.
struct Step {
    members: usize,
    at: SystemTime,
    rebalanced: Option<Duration>,
}

fn seconds(d: Option<Duration>) -> String {
    d.map_or_else(
        || "never".to_owned(),
        |d| format!("{:.1} s", d.as_secs_f64()),
    )
}

/// The longest delivery latency of the writes answered TRUE in `[from, to)`: from the answer to
/// the first delivery the upstream received of it (a write delivered never counts as the time
/// to `until`).
fn longest_wait(
    answered: &[(String, SystemTime)],
    delivered: &HashMap<String, SystemTime>,
    (from, to): (SystemTime, SystemTime),
    until: SystemTime,
) -> Duration {
    answered
        .iter()
        .filter(|(_, at)| *at >= from && *at < to)
        .map(|(id, at)| {
            let arrived = delivered.get(id).copied().unwrap_or(until);
            arrived.duration_since(*at).unwrap_or_default()
        })
        .max()
        .unwrap_or_default()
}

/// The first time the upstream received and accepted (2xx) each body, from `since` on.
fn first_deliveries(upstream: &Upstream, since: SystemTime) -> HashMap<String, SystemTime> {
    let mut first = HashMap::new();
    for received in upstream.received() {
        if received.at >= since && (200..300).contains(&received.status) {
            first
                .entry(String::from_utf8_lossy(&received.body).into_owned())
                .or_insert(received.at);
        }
    }
    first
}

async fn under_load(name: &'static str, strategy: &str, writers: usize, w: Windows) -> Row {
    println!("  {name} rebalancing ({strategy})");
    let applied = Applied::Http(Upstream::start(|_| 200).await);
    let (namespace, mut fleet, groups, _) = start(&applied.target(), strategy).await;
    let first = rebalanced(&groups, CONSUMERS, Instant::now()).await;
    let load = Writers::start(&fleet.channels, &namespace, (writers, name), body);
    let started = SystemTime::now();
    tokio::time::sleep(w.steady).await;
    let mut steps = Vec::new();
    let mut killed = 0;
    for members in STEPS {
        let (at, since) = (SystemTime::now(), Instant::now());
        killed += scale_to(&mut fleet, members).await;
        let rebalanced = rebalanced(&groups, members, since).await;
        println!(
            "    scaled to {members}: rebalanced after {}",
            seconds(rebalanced)
        );
        let left = w.step.saturating_sub(since.elapsed());
        tokio::time::sleep(left).await;
        steps.push(Step {
            members,
            at,
            rebalanced,
        });
    }
    let ended = SystemTime::now();
    let (answers, answered, _) = load.stop().await;
    let outcome = settle(&answers, &applied, Instant::now()).await;
    let Applied::Http(upstream) = &applied else {
        unreachable!()
    };
    let delivered = first_deliveries(upstream, started);
    let until = SystemTime::now();
    let first_step = steps[0].at;
    let baseline = longest_wait(&answered, &delivered, (started, first_step), until);
    let mut broken = judge_first(first);
    if killed > 0 {
        broken.push(format!(
            "{killed} consumers did not stop within {STOP_LIMIT:?} of SIGTERM"
        ));
    }
    let mut notes = vec![format!(
        "3 consumers: group stable after {}; longest delivery wait in the steady {:.0} s: {:.2} s",
        seconds(first),
        w.steady.as_secs_f64(),
        baseline.as_secs_f64()
    )];
    for (i, step) in steps.iter().enumerate() {
        let to = steps.get(i + 1).map_or(ended, |s| s.at);
        let pause = longest_wait(&answered, &delivered, (step.at, to), until);
        notes.push(format!(
            "to {}: rebalanced after {}, longest delivery wait {:.2} s",
            step.members,
            seconds(step.rebalanced),
            pause.as_secs_f64()
        ));
        if step.rebalanced.is_none_or(|r| r > GOAL) || pause > GOAL {
            broken.push(format!(
                "scaling to {} took past the goal of {} s",
                step.members,
                GOAL.as_secs()
            ));
        }
    }
    fleet.stop();
    Row {
        drill: if name == "eager" {
            "cluster-scale eager"
        } else {
            "cluster-scale cooperative"
        },
        backend: Backend::Kafka,
        faults: format!("consumers 3 -> 5 -> 2 ({strategy})"),
        notes: notes.join("; "),
        outcome,
        broken,
    }
}

/// The held run: the target down (503) while the consumers scale, then serving again.
async fn while_held(strategy: &str, writers: usize, w: Windows) -> Row {
    println!("  held: the target down while the consumers scale ({strategy})");
    let upstream = Upstream::broken(503).await;
    let (namespace, mut fleet, groups, dlqs) = start(&upstream.target(), strategy).await;
    let first = rebalanced(&groups, CONSUMERS, Instant::now()).await;
    let load = Writers::start(&fleet.channels, &namespace, (writers, "held"), body);
    tokio::time::sleep(w.steady).await;
    let (answers, answered, _) = load.stop().await;
    // Every consumer tried the target and holds in place by now.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut notes = vec![format!(
        "{} writes answered TRUE while the target answered 503",
        answered.len()
    )];
    let mut broken = judge_first(first);
    scale_held(&mut fleet, &groups, &mut notes, &mut broken).await;
    let mut dead = 0;
    for dlq in &dlqs {
        dead += kafka_log(dlq).await.len();
    }
    if dead > 0 {
        broken.push(format!("{dead} held entries were dead-lettered"));
    }
    let (recovered, lost) = deliver_held(&upstream, &answered).await;
    notes.push(format!(
        "target back: every held entry delivered after {}",
        seconds(recovered)
    ));
    fleet.stop();
    let outcome = Outcome {
        reasons: answers.top_reasons(3),
        written: answers.len(),
        answered: answers.tally(),
        true_lost: lost,
        // Not checked here: a FALSE write delivered would show in the loads above.
        false_applied: 0,
        duplicates: None,
        recovered,
    };
    Row {
        drill: "cluster-scale held",
        backend: Backend::Kafka,
        faults: format!("target down (503); consumers 3 -> 5 -> 2 ({strategy})"),
        notes: notes.join("; "),
        outcome,
        broken,
    }
}

/// Scales the fleet's consumers through the steps while the target is down, each step's
/// rebalance timed into `notes` and judged into `broken`.
async fn scale_held(
    fleet: &mut Fleet,
    groups: &[String],
    notes: &mut Vec<String>,
    broken: &mut Vec<String>,
) {
    for members in STEPS {
        let since = Instant::now();
        if scale_to(fleet, members).await > 0 {
            broken.push(format!(
                "a consumer did not stop within {STOP_LIMIT:?} of SIGTERM"
            ));
        }
        let took = rebalanced(groups, members, since).await;
        println!(
            "    scaled to {members} while held: rebalanced after {}",
            seconds(took)
        );
        notes.push(format!(
            "to {members} held: rebalanced after {}",
            seconds(took)
        ));
        if took.is_none_or(|r| r > GOAL) {
            broken.push(format!(
                "scaling to {members} while held took past the goal"
            ));
        }
    }
}

/// Serves again and waits (up to 180 s) for every held write answered TRUE to be delivered,
/// then the stragglers' time: how long that took, and how many never were.
async fn deliver_held(
    upstream: &Upstream,
    answered: &[(String, SystemTime)],
) -> (Option<Duration>, usize) {
    // Any 2xx counts, whenever received: only the mended upstream answers one, and a request
    // received just before the mend may be answered after it (and is then never sent again).
    let mended = SystemTime::UNIX_EPOCH;
    let since = Instant::now();
    upstream.mend();
    let ids: Vec<&String> = answered.iter().map(|(id, _)| id).collect();
    let mut recovered = None;
    while since.elapsed() < Duration::from_secs(180) {
        let delivered = first_deliveries(upstream, mended);
        if ids.iter().all(|id| delivered.contains_key(*id)) {
            recovered = Some(since.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(crate::load::stragglers()).await;
    let delivered = first_deliveries(upstream, mended);
    let lost = ids
        .iter()
        .filter(|id| !delivered.contains_key(**id))
        .count();
    (recovered, lost)
}

fn judge_first(first: Option<Duration>) -> Vec<String> {
    match first {
        Some(_) => Vec::new(),
        None => vec!["the three consumers' groups never became stable".to_owned()],
    }
}
