//! A small CQL shell for the local stack (the stack runs Cassandra from its jars, without cqlsh):
//! runs each argument as a statement and prints the rows it returns.
//!
//!     cargo run -p wal-consumer --example cql -- "SELECT * FROM pds.objects"
//!
//! Connects to WAL_CQL_NODES (as `scripts/stack env` sets it), else 127.0.0.1:19042.

use std::process::ExitCode;

use scylla::client::session_builder::SessionBuilder;
use scylla::value::Row;

#[tokio::main]
async fn main() -> ExitCode {
    let statements: Vec<String> = std::env::args().skip(1).collect();
    if statements.is_empty() {
        eprintln!("usage: cql STATEMENT [STATEMENT...]");
        return ExitCode::from(2);
    }
    let nodes = std::env::var("WAL_CQL_NODES").unwrap_or_else(|_| "127.0.0.1:19042".into());
    let nodes: Vec<&str> = nodes.split(',').collect();
    let session = match SessionBuilder::new().known_nodes(&nodes).build().await {
        Ok(session) => session,
        Err(error) => {
            eprintln!(
                "cannot connect to CQL nodes {nodes:?}: {error} (is the stack up? scripts/stack up)"
            );
            return ExitCode::FAILURE;
        }
    };
    for statement in statements {
        let result = match session.query_unpaged(statement.as_str(), &[]).await {
            Ok(result) => result,
            Err(error) => {
                eprintln!("{statement}: {error}");
                return ExitCode::FAILURE;
            }
        };
        let Ok(rows) = result.into_rows_result() else {
            continue; // not a SELECT
        };
        let names: Vec<&str> = rows.column_specs().iter().map(|c| c.name()).collect();
        println!("{}", names.join(" | "));
        let Ok(typed) = rows.rows::<Row>() else {
            continue;
        };
        for row in typed.flatten() {
            let cells: Vec<String> = row
                .columns
                .iter()
                .map(|cell| {
                    cell.as_ref()
                        .map_or_else(|| "null".to_owned(), ToString::to_string)
                })
                .collect();
            println!("{}", cells.join(" | "));
        }
    }
    ExitCode::SUCCESS
}
