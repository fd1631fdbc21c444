//! The real parts one library's run is checked against: an HTTP upstream every namespace
//! delivers to, the cases' namespaces under fresh names, two producer processes with the cases'
//! test faults, and a consumer.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use wal_namespaces::Namespace;
use wal_testkit::pki::{Named, Pki};
use wal_testkit::{
    Backend, ConsumerHandle, ProducerProcess, Upstream, namespace_json, refusing_address,
    start_consumer, unique, with_durable_storage,
};

use crate::case::{Case, NamespacePlan};

/// The keyspace two-phase namespaces stage their items in.
const STAGING: &str = "wal_conformance";

/// The principal the runners' client certificate names (its CN), granted writes by the secured
/// case's namespaces.
pub const PRINCIPAL: &str = "conformance";

#[derive(Debug)]
pub struct Stage {
    pub upstream: Upstream,
    /// By case name and alias.
    pub namespaces: BTreeMap<(String, String), Namespace>,
    pub producers: Vec<Producer>,
    /// A third producer serving mTLS and authorizing writes, for the cases marked `secured`.
    pub secured: Producer,
    /// The files a runner's client presents to it (`tls` in the plan).
    pub tls: serde_json::Value,
    _consumer: ConsumerHandle,
    folder: PathBuf,
    _pki: Pki,
}

#[derive(Debug)]
pub struct Producer {
    pub process: ProducerProcess,
    pub address: String,
    pub metrics: String,
    pub alive: bool,
    /// Its metrics as scraped just before it was killed: what it had served by then.
    pub at_kill: Option<String>,
}

impl Stage {
    pub async fn start(cases: &[(String, Case)]) -> Self {
        let upstream = Upstream::start(|_| 200).await;
        let folder = std::env::temp_dir().join(unique("conformance"));
        std::fs::create_dir_all(&folder).expect("a folder for the namespace files");
        let mut namespaces = BTreeMap::new();
        let mut faults = Vec::new();
        for (case, plan) in cases {
            for (alias, wanted) in &plan.namespaces {
                let (namespace, text) = config(&upstream.target(), wanted);
                std::fs::write(folder.join(format!("{}.json", namespace.name)), text)
                    .expect("write a namespace file");
                if let Some(fault) = &wanted.fault {
                    faults.push(format!("{fault}={}", namespace.name));
                }
                namespaces.insert((case.clone(), alias.clone()), namespace);
            }
        }
        let mut producers = Vec::new();
        for _ in 0..2 {
            let metrics = refusing_address().to_string();
            let env = [
                ("WAL_TEST_FAULTS", faults.join(",")),
                ("WAL_PRODUCER_METRICS_LISTEN", metrics.clone()),
            ];
            let process =
                ProducerProcess::start_with_env(&folder, Duration::from_secs(5), &env).await;
            let address = process.address.clone();
            producers.push(Producer {
                process,
                address,
                metrics,
                alive: true,
                at_kill: None,
            });
        }
        let pki = Pki::new("conformance CA");
        let (secured, tls) = secured(&pki, &folder).await;
        let consumer = start_consumer(namespaces.values().cloned().collect()).await;
        Self {
            upstream,
            namespaces,
            producers,
            secured,
            tls,
            _consumer: consumer,
            folder,
            _pki: pki,
        }
    }

    /// The addresses of the producers still running.
    pub fn live_producers(&self) -> Vec<String> {
        self.producers
            .iter()
            .filter(|p| p.alive)
            .map(|p| p.address.clone())
            .collect()
    }

    /// Kills a producer with SIGKILL, its metrics scraped first, so a case can still check
    /// what it served before it went away (that a client used it at all).
    pub async fn kill(&mut self, producer: usize) {
        if let Some(producer) = self.producers.get_mut(producer)
            && producer.alive
        {
            producer.at_kill = Some(scrape(&producer.metrics).await);
            producer.process.kill();
            producer.alive = false;
        }
    }

    /// What each producer counted in `wal_producer_requests_total` for a namespace and outcome;
    /// a killed one, up to its kill (a write it answered between that scrape and its death is
    /// not counted).
    pub async fn requests(&self, namespace: &str, outcome: &str) -> Vec<u64> {
        let series = format!(
            "wal_producer_requests_total{{namespace=\"{namespace}\",outcome=\"{outcome}\"}}"
        );
        let mut each = Vec::new();
        for producer in &self.producers {
            let text = match &producer.at_kill {
                Some(text) => text.clone(),
                None => scrape(&producer.metrics).await,
            };
            each.push(
                text.lines()
                    .filter_map(|line| line.strip_prefix(series.as_str()))
                    .filter_map(|value| value.trim().parse::<f64>().ok())
                    .map(|value| value as u64)
                    .sum::<u64>(),
            );
        }
        each
    }
}

/// The metrics a producer serves on `address`. A scrape that fails is the stage's failure, not
/// the library's: it panics naming the address, rather than count nothing and blame the client.
async fn scrape(address: &str) -> String {
    let url = format!("http://{address}/metrics");
    let scraped = async { reqwest::get(&url).await?.error_for_status()?.text().await };
    match tokio::time::timeout(Duration::from_secs(10), scraped).await {
        Ok(Ok(text)) => text,
        Ok(Err(error)) => panic!("scraping {url}: {error}"),
        Err(_) => panic!("scraping {url}: no answer within 10 s"),
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// A producer serving the same namespaces over mTLS with authorization on, and the files (CA,
/// client certificate and key, server name) a runner's client needs to write to it.
async fn secured(pki: &Pki, folder: &std::path::Path) -> (Producer, serde_json::Value) {
    let flags = pki.server_flags("secured-producer", "DEFAULT");
    let path = |p: Option<PathBuf>| p.map(|p| p.display().to_string()).unwrap_or_default();
    let metrics = refusing_address().to_string();
    let env = [
        ("WAL_TLS_CERT", path(flags.tls_cert)),
        ("WAL_TLS_KEY", path(flags.tls_key)),
        ("WAL_TLS_CLIENT_CA", path(flags.tls_client_ca)),
        ("WAL_AUTHORIZE", "true".to_owned()),
        ("WAL_PRODUCER_METRICS_LISTEN", metrics.clone()),
    ];
    let client = pki.client(Named::Cn(PRINCIPAL));
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(pki.ca_pem()))
        .identity(tonic::transport::Identity::from_pem(
            &client.cert,
            &client.key,
        ))
        .domain_name("localhost");
    let process = ProducerProcess::start_secured(folder, Duration::from_secs(5), &env, tls).await;
    let (certificate, key) = (
        folder.join("runner-client.pem"),
        folder.join("runner-client.key"),
    );
    std::fs::write(&certificate, &client.cert).expect("write the client certificate");
    std::fs::write(&key, &client.key).expect("write the client key");
    let files = serde_json::json!({
        "ca": pki.ca_path().display().to_string(),
        "certificate": certificate.display().to_string(),
        "key": key.display().to_string(),
        "domain": "localhost",
    });
    let address = process.address.clone();
    let producer = Producer {
        process,
        address,
        metrics,
        alive: true,
        at_kill: None,
    };
    (producer, files)
}

/// A namespace on Kafka delivering to `target`, as the case wants it: its config and file text.
fn config(target: &str, wanted: &NamespacePlan) -> (Namespace, String) {
    let extra: Vec<String> = wanted
        .extra
        .iter()
        .map(|(field, value)| format!("\"{field}\": {value}"))
        .collect();
    let mut text = namespace_json(Backend::Kafka, 1, target, &extra.join(", "));
    if wanted.durable_storage {
        text = with_durable_storage(&text, STAGING);
    }
    let namespace = wal_namespaces::parse(&text, "conformance")
        .unwrap_or_else(|e| panic!("a case's namespace config: {e}"));
    (namespace, text)
}
