//! `walctl clusters FILE [NAMESPACE_FILE...]`: reads a cluster map as every process would (over
//! the single-address flags), prints what each name stands for, and checks that the namespace
//! files given name only clusters and shards it has: before a map or a namespace is rolled out.

use std::path::PathBuf;

use serde_json::json;
use wal_clusters::ClusterMap;
use wal_clusters::flags::BrokerFlags;
use wal_runtime::secret::Secrets;

use crate::Failure;
use crate::output::{Format, print_json, table};

#[derive(Debug, clap::Args)]
pub struct Clusters {
    /// The cluster map (JSON) to check.
    map: PathBuf,
    /// Namespace config files whose cluster and shard names must be in the map.
    namespaces: Vec<PathBuf>,
    /// Read the map's ${env:...} and ${file:...} secrets, as the processes do (read), or only
    /// check their form (form): for a map checked away from where it runs, a chart's say.
    #[arg(long, value_enum, default_value_t = SecretsArg::Read)]
    secrets: SecretsArg,
    #[command(flatten)]
    brokers: BrokerFlags,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SecretsArg {
    Read,
    Form,
}

pub fn run(command: Clusters, format: Format) -> Result<(), Failure> {
    let flags = BrokerFlags {
        clusters: Some(command.map.clone()),
        ..command.brokers
    };
    let secrets = match command.secrets {
        SecretsArg::Read => Secrets::Read,
        SecretsArg::Form => Secrets::FormOnly,
    };
    let map = flags
        .cluster_map_as(flags.kafka(), &Default::default(), secrets)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let mut problems = Vec::new();
    for path in &command.namespaces {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display())))?;
        let origin = path.display().to_string();
        match wal_namespaces::parse(&text, &origin) {
            Ok(namespace) => match map.check(std::slice::from_ref(&namespace)) {
                Ok(()) => {}
                Err(unknown) => {
                    problems.extend(unknown.0.into_iter().map(|p| format!("{origin}: {p}")))
                }
            },
            Err(errors) => problems.push(errors.to_string()),
        }
    }
    print_map(&map, format);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::usage(problems.join("\n")))
    }
}

fn print_map(map: &ClusterMap, format: Format) {
    let default_kafka = map.kafka_name(None);
    // (name, default, address, copies of what the platform creates there)
    let kafka: Vec<_> = map
        .kafka_clusters()
        .map(|(name, k)| {
            let copies = match k.min_insync_replicas {
                Some(in_sync) => format!("{}, {in_sync} in sync", k.replication_factor),
                None => format!("{}, the broker's minimum in sync", k.replication_factor),
            };
            let address = k.bootstrap_servers.clone();
            (name, name == default_kafka, address, copies)
        })
        .collect();
    let cql: Vec<_> = map
        .cql_shards()
        .map(|(name, s)| {
            let copies = s.replication_factor.unwrap_or(1).to_string();
            let default = name == map.default_cql_name();
            (name, default, s.contact_points.join(","), copies)
        })
        .collect();
    let sqs = map.sqs();
    let sqs_at = sqs
        .endpoint
        .clone()
        .unwrap_or_else(|| format!("AWS {}", sqs.region));
    match format {
        Format::Json => print_json(&json!({
            "kafka": map.kafka_clusters().map(|(n, k)| json!({
                "name": n, "default": n == default_kafka, "bootstrap_servers": k.bootstrap_servers,
                "replication_factor": k.replication_factor, "min_insync_replicas": k.min_insync_replicas,
            })).collect::<Vec<_>>(),
            "cql": map.cql_shards().map(|(n, s)| json!({
                "name": n, "default": n == map.default_cql_name(),
                "contact_points": s.contact_points.join(","),
                "replication_factor": s.replication_factor.unwrap_or(1),
            })).collect::<Vec<_>>(),
            "sqs": sqs_at,
        })),
        Format::Table => {
            let mut rows = table(&["kind", "name", "default", "address", "copies"]);
            let sections = [("kafka", &kafka), ("cql", &cql)];
            for (kind, entries) in sections {
                for (name, default, address, copies) in entries.iter() {
                    let default = if *default { "yes" } else { "" };
                    rows.add_row(vec![kind, name, default, address.as_str(), copies.as_str()]);
                }
            }
            rows.add_row(vec!["sqs", "", "", sqs_at.as_str(), ""]);
            println!("{rows}");
        }
    }
}
