//! `walctl breakers`: which targets the consumers hold entries for, read from each consumer's
//! metrics (`wal_consumer_breaker_*`, by endpoint). A consumer's breaker opens when a target is
//! unavailable; while it is open its entries wait in place (see consumer/README.md).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::Failure;
use crate::output::{Format, print_json, table};

#[derive(Debug, clap::Args)]
pub struct Breakers {
    /// A consumer's metrics address (its --metrics-listen); give it once per consumer.
    #[arg(
        long = "consumer",
        env = "WAL_CONSUMER_METRICS",
        value_delimiter = ',',
        default_value = "http://127.0.0.1:9465"
    )]
    consumers: Vec<String>,
    /// List every endpoint the consumers have delivered to, not only the open ones.
    #[arg(long)]
    all: bool,
}

/// One endpoint's breaker as a consumer reports it.
#[derive(Debug, Default, Clone, PartialEq)]
struct Row {
    consumer: String,
    endpoint: String,
    open: bool,
    opened_at: f64,
    held: f64,
    opened_total: f64,
}

pub async fn run(command: Breakers, format: Format) -> Result<(), Failure> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| Failure::broker(format!("building the HTTP client: {e}")))?;
    let mut rows = Vec::new();
    for consumer in &command.consumers {
        let url = format!("{}/metrics", consumer.trim_end_matches('/'));
        let text = async { client.get(&url).send().await?.error_for_status()?.text().await }
            .await
            .map_err(|e| {
                Failure::broker(format!(
                    "cannot read the consumer's metrics at {url}: {e}. Is wal-consumer running? Pass its --metrics-listen address with --consumer or WAL_CONSUMER_METRICS"
                ))
            })?;
        let parsed = parse(consumer, &text).map_err(|e| {
            Failure::broker(format!(
                "{url} is not a Prometheus text exposition ({e}); is it a consumer's --metrics-listen?"
            ))
        })?;
        rows.extend(parsed);
    }
    rows.retain(|row| command.all || row.open);
    match format {
        Format::Json => print_json(&json!(rows.iter().map(row_json).collect::<Vec<_>>())),
        Format::Table if rows.is_empty() => println!("no open breakers: every target answers"),
        Format::Table => {
            let mut out = table(&[
                "consumer",
                "endpoint",
                "state",
                "open for",
                "entries waiting",
                "times opened",
            ]);
            for row in &rows {
                out.add_row(vec![
                    row.consumer.clone(),
                    row.endpoint.clone(),
                    if row.open { "OPEN" } else { "closed" }.to_owned(),
                    open_for(row)
                        .map_or_else(String::new, |d| humantime::format_duration(d).to_string()),
                    format!("{}", row.held),
                    format!("{}", row.opened_total),
                ]);
            }
            println!("{out}");
        }
    }
    Ok(())
}

fn row_json(row: &Row) -> serde_json::Value {
    json!({
        "consumer": row.consumer,
        "endpoint": row.endpoint,
        "open": row.open,
        "open_seconds": open_for(row).map(|d| d.as_secs()),
        "entries_waiting": row.held,
        "times_opened": row.opened_total,
    })
}

fn open_for(row: &Row) -> Option<Duration> {
    if !row.open || row.opened_at <= 0.0 {
        return None;
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    Some(Duration::from_secs(
        now.as_secs().saturating_sub(row.opened_at as u64),
    ))
}

/// The breaker rows in a Prometheus text exposition, one per endpoint.
fn parse(consumer: &str, text: &str) -> Result<Vec<Row>, String> {
    let mut rows: Vec<Row> = Vec::new();
    for sample in wal_runtime::exposition::parse(text)? {
        let Some(endpoint) = sample
            .label("endpoint")
            .filter(|_| sample.name.starts_with("wal_consumer_breaker_"))
        else {
            continue;
        };
        let at = match rows.iter().position(|r| r.endpoint == endpoint) {
            Some(at) => at,
            None => {
                rows.push(Row {
                    consumer: consumer.to_owned(),
                    endpoint: endpoint.to_owned(),
                    ..Row::default()
                });
                rows.len() - 1
            }
        };
        let row = &mut rows[at];
        match sample.name.as_str() {
            "wal_consumer_breaker_open" => row.open = sample.value > 0.0,
            "wal_consumer_breaker_opened_at_seconds" => row.opened_at = sample.value,
            "wal_consumer_breaker_held" => row.held = sample.value,
            "wal_consumer_breaker_opened_total" => row.opened_total = sample.value,
            _ => {}
        }
    }
    rows.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_metrics_become_one_row_per_endpoint() {
        let text = r#"# TYPE wal_consumer_breaker_open gauge
wal_consumer_breaker_open{endpoint="cql/shop"} 1
wal_consumer_breaker_open{endpoint="http/http://10.0.0.1:8080"} 0
wal_consumer_breaker_open{endpoint="cache/h1:11211,h2:11211"} 1
wal_consumer_breaker_held{endpoint="cql/shop"} 42
wal_consumer_breaker_opened_at_seconds{endpoint="cql/shop"} 1700000000
wal_consumer_breaker_opened_total{endpoint="cql/shop"} 3
wal_consumer_delivered_total{namespace="a",target="cql"} 7
"#;
        let rows = parse("c1", text).unwrap();
        assert_eq!(rows.len(), 3);
        // A cache endpoint names its servers with commas: one row, its name whole.
        assert_eq!(rows[0].endpoint, "cache/h1:11211,h2:11211");
        assert!(rows[0].open);
        let rows = &rows[1..];
        assert_eq!(
            rows[0],
            Row {
                consumer: "c1".into(),
                endpoint: "cql/shop".into(),
                open: true,
                opened_at: 1_700_000_000.0,
                held: 42.0,
                opened_total: 3.0,
            }
        );
        assert!(!rows[1].open);
        assert!(open_for(&rows[0]).is_some());
        assert_eq!(open_for(&rows[1]), None);
    }

    #[test]
    fn a_page_that_is_not_an_exposition_is_refused_not_read_as_no_breakers() {
        let refused = parse("c1", "<html><body>not found</body></html>").unwrap_err();
        assert!(refused.contains("line 1"), "{refused}");
    }
}
