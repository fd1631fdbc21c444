//! What a drill's writes came to: read back from the target once delivery is over, and set
//! against what each write was answered.

use super::*;

/// Where a drill reads back what was applied.
pub enum Applied {
    /// An http target: every delivery, so duplicates are counted.
    Http(Upstream),
    /// A cql table `(id, value)`: a row per id, so duplicates cannot be told (an upsert).
    Cql { cql: Box<Cql>, table: String },
    /// Regions' caches (cross-region replication): an id is applied once every region's
    /// memcached holds its key; memcached lists nothing, so only the ids asked about are known.
    Regions {
        caches: Vec<memcache::exp::AsyncMetaClient>,
        target: String,
    },
}

impl Applied {
    pub async fn cql() -> Self {
        let cql = Cql::connect().await;
        let table = cql.table().await;
        Self::Cql {
            cql: Box::new(cql),
            table,
        }
    }

    /// The target config JSON that writes here.
    pub fn target(&self) -> String {
        match self {
            Self::Http(upstream) => upstream.target(),
            Self::Cql { table, .. } => wal_testkit::cql_target(table),
            Self::Regions { target, .. } => target.clone(),
        }
    }

    pub fn payload(&self) -> Payload {
        match self {
            Self::Http(_) => body,
            Self::Cql { .. } => row,
            Self::Regions { .. } => |id| wal_testkit::cache_set(id, "v").into_bytes(),
        }
    }

    /// How many times each id was applied (of `asked`, where the target cannot list them); for
    /// regions, in how many regions. Err when the target cannot be read now.
    pub async fn counts(&self, asked: &[String]) -> Result<HashMap<String, usize>, String> {
        match self {
            Self::Regions { caches, .. } => {
                use futures::StreamExt as _;
                Ok(futures::stream::iter(asked)
                    .map(|id| async move {
                        let mut regions = 0;
                        for cache in caches {
                            if wal_testkit::cached(cache, id).await.is_some() {
                                regions += 1;
                            }
                        }
                        (regions > 0).then(|| (id.clone(), regions))
                    })
                    .buffer_unordered(64)
                    .filter_map(|applied| async move { applied })
                    .collect()
                    .await)
            }
            Self::Http(upstream) => {
                let mut counts = HashMap::new();
                for body in upstream.bodies() {
                    *counts.entry(body).or_default() += 1;
                }
                Ok(counts)
            }
            Self::Cql { cql, table } => {
                use futures::TryStreamExt as _;
                // Cassandra may be away (the outage drill reads while it comes back).
                let select = format!("SELECT id FROM {KEYSPACE}.{table}");
                let pager = cql
                    .session
                    .query_iter(select, ())
                    .await
                    .map_err(|e| e.to_string())?;
                pager
                    .rows_stream::<(String,)>()
                    .map_err(|e| e.to_string())?
                    .map_ok(|(id,)| (id, 1))
                    .try_collect()
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Whether an id [`counts`](Self::counts) gave `n` is applied whole: in every region, or
    /// delivered at least once.
    pub fn whole(&self, n: usize) -> bool {
        match self {
            Self::Regions { caches, .. } => n >= caches.len(),
            _ => n >= 1,
        }
    }

    /// Whether [`counts`](Self::counts) sees each delivery, so duplicates can be told.
    pub fn counts_duplicates(&self) -> bool {
        matches!(self, Self::Http(_))
    }
}

/// What a drill's writes came to, once delivery is over.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The most frequent reasons writes were not answered TRUE.
    pub reasons: Vec<(Answer, String, usize)>,
    pub written: usize,
    pub answered: HashMap<&'static str, usize>,
    pub true_lost: usize,
    /// Writes answered FALSE or shed (both: nothing stored) that were applied all the same.
    pub false_applied: usize,
    pub duplicates: Option<usize>,
    /// From the end of the faults to the last TRUE write applied; None if not within the limit.
    pub recovered: Option<Duration>,
}

/// How long a drill waits, once every TRUE write is applied, for what may still come: writes
/// answered otherwise but stored after all, an SQS message seen again after its visibility
/// timeout (30 s), a marker a producer's sweep sends again (every 30 s). 35 s; 5 s in a smoke run.
static STRAGGLERS: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

pub fn set_stragglers(wait: Duration) {
    let _ = STRAGGLERS.set(wait);
}

pub fn stragglers() -> Duration {
    STRAGGLERS.get().copied().unwrap_or(Duration::from_secs(35))
}

/// What the target holds for `asked`, read until it answers (60 s at most: then the drill
/// cannot tell, and stops).
async fn read_back(applied: &Applied, asked: &[String]) -> HashMap<String, usize> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match applied.counts(asked).await {
            Ok(counts) => return counts,
            Err(e) if Instant::now() > deadline => {
                panic!("the drill could not read back what was applied: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// Waits (up to [`DRAIN_LIMIT`] after `since`) until every write answered TRUE is applied, waits
/// [`stragglers`] more, and counts.
pub async fn settle(answers: &Answers, applied: &Applied, since: Instant) -> Outcome {
    settle_where(answers, applied, since, |_| true).await
}

/// Like [`settle`], where only the TRUE writes whose id `must_apply` picks must be applied (the
/// others end elsewhere, on a DLQ say, which the drill checks itself).
pub async fn settle_where(
    answers: &Answers,
    applied: &Applied,
    since: Instant,
    must_apply: impl Fn(&str) -> bool,
) -> Outcome {
    let true_ids: Vec<String> = answers
        .with(Answer::True)
        .into_iter()
        .filter(|id| must_apply(id))
        .collect();
    let whole = |counts: &HashMap<String, usize>, id: &String| {
        counts.get(id).is_some_and(|n| applied.whole(*n))
    };
    let mut recovered = None;
    while since.elapsed() < DRAIN_LIMIT {
        if let Ok(counts) = applied.counts(&true_ids).await
            && true_ids.iter().all(|id| whole(&counts, id))
        {
            recovered = Some(since.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(stragglers()).await;
    let counts = read_back(applied, &answers.ids()).await;
    // FALSE and shed (RESOURCE_EXHAUSTED) both promise that nothing was stored.
    let not_stored: Vec<String> = [Answer::False, Answer::Shed]
        .iter()
        .flat_map(|a| answers.with(*a))
        .collect();
    Outcome {
        reasons: answers.top_reasons(3),
        written: answers.len(),
        answered: answers.tally(),
        true_lost: true_ids.iter().filter(|id| !whole(&counts, id)).count(),
        false_applied: not_stored
            .iter()
            .filter(|id| counts.contains_key(*id))
            .count(),
        duplicates: applied.counts_duplicates().then(|| {
            counts
                .iter()
                .filter(|(id, _)| must_apply(id))
                .map(|(_, n)| n - 1)
                .sum()
        }),
        recovered,
    }
}
