//! The consumers' own counts, read from their metrics endpoints (`--consumers`, what `walctl
//! breakers` reads; the control plane does not know its consumers): per destination of a
//! namespace, the entries delivered, retried and dead-lettered (totals, and per second between
//! the last two reads), those in flight, held in memory for their deliver-at, and not yet
//! received (backlog); and the breakers open on each consumer with the entries they hold.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use wal_runtime::exposition::{self, Sample};

/// How often each consumer's metrics are read; rates are over this long.
const EVERY: Duration = Duration::from_secs(10);
/// A consumer that does not answer within this is shown as unreadable until it does.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The consumers' metrics addresses and what was last read from each.
#[derive(Debug, Clone, Default)]
pub struct Consumers {
    addresses: Arc<Vec<String>>,
    reads: Arc<Mutex<BTreeMap<String, Reads>>>,
}

#[derive(Debug, Default)]
struct Reads {
    last: Option<Scraped>,
    before: Option<Scraped>,
    /// Why the last read failed, while it does.
    error: Option<String>,
}

#[derive(Debug)]
struct Scraped {
    at: Instant,
    at_micros: i64,
    samples: Vec<Sample>,
}

/// One destination's counts on one consumer.
#[derive(Debug, Default, Clone, PartialEq)]
struct Counts {
    delivered: f64,
    retried: f64,
    dead_lettered: f64,
    in_flight: f64,
    held: f64,
    backlog: f64,
}

impl Consumers {
    /// Consumers whose metrics are served at `addresses` (`http://host:port`, their
    /// --metrics-listen); refused, naming it, for one that is not an http(s) URL.
    pub fn new(addresses: Vec<String>) -> Result<Self, String> {
        for address in &addresses {
            match reqwest::Url::parse(address) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => {}
                _ => {
                    return Err(format!(
                        "the consumer metrics address '{address}' is not an http:// or https:// URL; for example http://127.0.0.1:9465"
                    ));
                }
            }
        }
        // One read each, however often it is named: a second would make the rates span the
        // milliseconds between two reads.
        let mut unique = addresses;
        let mut seen = std::collections::BTreeSet::new();
        unique.retain(|a| seen.insert(a.clone()));
        Ok(Self {
            addresses: Arc::new(unique),
            reads: Arc::default(),
        })
    }

    /// Reads every consumer's metrics now and every [`EVERY`] after, until dropped with the
    /// task it returns.
    pub fn watch(&self) -> tokio::task::JoinHandle<()> {
        let consumers = self.clone();
        tokio::spawn(async move {
            let client = match reqwest::Client::builder().timeout(TIMEOUT).build() {
                Ok(client) => client,
                Err(e) => {
                    tracing::error!(error = %e, "no HTTP client for the consumers' metrics");
                    return;
                }
            };
            let mut every = tokio::time::interval(EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                for address in consumers.addresses.iter() {
                    let read = read(&client, address).await;
                    consumers.record(address, read);
                }
            }
        })
    }

    fn record(&self, address: &str, read: Result<Vec<Sample>, String>) {
        // A panic elsewhere while holding the lock left plain data: still good to read.
        let mut reads = self.reads.lock().unwrap_or_else(PoisonError::into_inner);
        let reads = reads.entry(address.to_owned()).or_default();
        match read {
            Ok(samples) => {
                reads.before = reads.last.take();
                reads.last = Some(Scraped {
                    at: Instant::now(),
                    at_micros: now_micros(),
                    samples,
                });
                reads.error = None;
            }
            Err(error) => reads.error = Some(error),
        }
    }

    /// What every consumer showed of `namespace` at its last read.
    pub fn view(&self, namespace: &str) -> Value {
        let reads = self.reads.lock().unwrap_or_else(PoisonError::into_inner);
        let rows: Vec<Value> = self
            .addresses
            .iter()
            .map(|address| match reads.get(address) {
                None => json!({"address": address, "error": "not read yet"}),
                Some(read) => consumer_json(address, read, namespace),
            })
            .collect();
        Value::Array(rows)
    }
}

async fn read(client: &reqwest::Client, address: &str) -> Result<Vec<Sample>, String> {
    let url = format!("{}/metrics", address.trim_end_matches('/'));
    let text = async {
        client
            .get(&url)
            .send()
            .await?
            .error_for_status()?
            .text()
            .await
    }
    .await
    .map_err(|e| format!("cannot read {url}: {e}"))?;
    exposition::parse(&text).map_err(|e| {
        format!(
            "{url} is not a Prometheus text exposition ({e}); is it a consumer's --metrics-listen?"
        )
    })
}

fn consumer_json(address: &str, reads: &Reads, namespace: &str) -> Value {
    let Some(last) = &reads.last else {
        return json!({"address": address, "error": reads.error});
    };
    let now = counts(&last.samples, namespace);
    let before = reads.before.as_ref().map(|b| {
        let seconds = last.at.duration_since(b.at).as_secs_f64();
        (counts(&b.samples, namespace), seconds)
    });
    let destinations: Vec<Value> = now
        .iter()
        .map(|(name, c)| {
            let rate = |of: fn(&Counts) -> f64| {
                let (before, seconds) = before.as_ref()?;
                let earlier = of(before.get(name)?);
                // A consumer restarted between the reads counts from zero again: no rate.
                (seconds > &0.0 && of(c) >= earlier).then(|| (of(c) - earlier) / seconds)
            };
            json!({"name": name, "delivered": c.delivered, "retried": c.retried,
                   "dead_lettered": c.dead_lettered, "in_flight": c.in_flight, "held": c.held,
                   "backlog": c.backlog,
                   "delivered_per_second": rate(|c| c.delivered),
                   "retried_per_second": rate(|c| c.retried),
                   "dead_lettered_per_second": rate(|c| c.dead_lettered)})
        })
        .collect();
    json!({"address": address, "error": reads.error, "read_at_micros": last.at_micros,
           "destinations": destinations, "breakers": breakers(&last.samples)})
}

/// `namespace`'s counts by destination, named as ListDestinations and Pause name them.
fn counts(samples: &[Sample], namespace: &str) -> BTreeMap<String, Counts> {
    let mut by_destination: BTreeMap<String, Counts> = BTreeMap::new();
    for sample in samples {
        if sample.label("namespace") != Some(namespace) {
            continue;
        }
        let name = match (sample.label("destination"), sample.label("region")) {
            (Some(store), _) => store.to_owned(),
            (None, Some(region)) => wal_namespaces::region_destination(region),
            (None, None) => wal_namespaces::DEFAULT_DESTINATION.to_owned(),
        };
        let field: fn(&mut Counts) -> &mut f64 = match sample.name.as_str() {
            "wal_consumer_delivered_total" => |c| &mut c.delivered,
            "wal_consumer_retried_total" => |c| &mut c.retried,
            "wal_consumer_dead_lettered_total" => |c| &mut c.dead_lettered,
            "wal_consumer_in_flight" => |c| &mut c.in_flight,
            "wal_consumer_held" => |c| &mut c.held,
            "wal_consumer_backlog" => |c| &mut c.backlog,
            _ => continue,
        };
        *field(by_destination.entry(name).or_default()) += sample.value;
    }
    by_destination
}

/// The consumer's open breakers: by endpoint, since when and the entries each holds.
fn breakers(samples: &[Sample]) -> Vec<Value> {
    let of = |metric: &str, endpoint: &str| {
        samples
            .iter()
            .find(|s| s.name == metric && s.label("endpoint") == Some(endpoint))
            .map_or(0.0, |s| s.value)
    };
    samples
        .iter()
        .filter(|s| s.name == "wal_consumer_breaker_open" && s.value > 0.0)
        .filter_map(|s| s.label("endpoint"))
        .map(|endpoint| {
            json!({"endpoint": endpoint,
                   "opened_at_micros": (of("wal_consumer_breaker_opened_at_seconds", endpoint) * 1e6) as i64,
                   "held": of("wal_consumer_breaker_held", endpoint),
                   "times_opened": of("wal_consumer_breaker_opened_total", endpoint)})
        })
        .collect()
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(text: &str) -> Vec<Sample> {
        exposition::parse(text).unwrap()
    }

    const AT_FIRST: &str = r#"# TYPE wal_consumer_delivered_total counter
wal_consumer_delivered_total{namespace="orders",target="cql"} 10
wal_consumer_delivered_total{namespace="orders",target="kafka",destination="events"} 4
wal_consumer_delivered_total{namespace="other",target="cql"} 99
# TYPE wal_consumer_dead_lettered_total counter
wal_consumer_dead_lettered_total{namespace="orders",target="cql",class="permanent"} 1
wal_consumer_dead_lettered_total{namespace="orders",target="cql",class="exhausted"} 2
# TYPE wal_consumer_backlog gauge
wal_consumer_backlog{namespace="orders",queue="orders"} 7
wal_consumer_backlog{namespace="orders",queue="orders",region="eu-west-1"} 3
# TYPE wal_consumer_breaker_open gauge
wal_consumer_breaker_open{endpoint="cache/h1:11211,h2:11211"} 1
wal_consumer_breaker_open{endpoint="http/up"} 0
# TYPE wal_consumer_breaker_held gauge
wal_consumer_breaker_held{endpoint="cache/h1:11211,h2:11211"} 42
"#;

    #[test]
    fn an_address_that_is_not_a_url_is_refused_by_name() {
        let refused = Consumers::new(vec!["127.0.0.1:9465".into()]).unwrap_err();
        assert!(refused.contains("'127.0.0.1:9465'"), "{refused}");
        assert!(Consumers::new(vec!["http://127.0.0.1:9465".into()]).is_ok());
    }

    #[test]
    fn counts_are_by_destination_of_the_namespace_asked_for() {
        let counts = counts(&samples(AT_FIRST), "orders");
        let names: Vec<&str> = counts.keys().map(String::as_str).collect();
        assert_eq!(names, ["default", "events", "region-eu-west-1"]);
        let default = &counts["default"];
        assert_eq!(default.delivered, 10.0);
        assert_eq!(default.dead_lettered, 3.0, "both classes");
        assert_eq!(default.backlog, 7.0);
        assert_eq!(counts["events"].delivered, 4.0);
        assert_eq!(counts["region-eu-west-1"].backlog, 3.0);
    }

    #[test]
    fn only_open_breakers_are_shown_with_what_they_hold() {
        let open = breakers(&samples(AT_FIRST));
        assert_eq!(open.len(), 1, "{open:?}");
        assert_eq!(
            open[0]["endpoint"], "cache/h1:11211,h2:11211",
            "its name whole"
        );
        assert_eq!(open[0]["held"], 42.0);
    }

    #[test]
    fn rates_are_between_the_last_two_reads_and_none_after_a_restart() {
        let consumers = Consumers::new(vec!["http://c1".into()]).unwrap();
        consumers.record("http://c1", Ok(samples(AT_FIRST)));
        let first = consumers.view("orders");
        assert_eq!(first[0]["destinations"][0]["delivered"], 10.0);
        assert!(first[0]["destinations"][0]["delivered_per_second"].is_null());
        std::thread::sleep(Duration::from_millis(50));
        let later = AT_FIRST
            .replace("} 10\n", "} 20\n")
            .replace(r#"destination="events"} 4"#, r#"destination="events"} 1"#);
        consumers.record("http://c1", Ok(samples(&later)));
        let second = consumers.view("orders");
        let rows = second[0]["destinations"].as_array().unwrap();
        assert!(rows[0]["delivered_per_second"].as_f64().unwrap() > 0.0);
        assert!(
            rows[1]["delivered_per_second"].is_null(),
            "events went back"
        );
        consumers.record("http://c1", Err("cannot read http://c1/metrics".into()));
        let failed = consumers.view("orders");
        assert_eq!(failed[0]["error"], "cannot read http://c1/metrics");
        assert_eq!(
            failed[0]["destinations"][0]["delivered"], 20.0,
            "the last read"
        );
    }
}
