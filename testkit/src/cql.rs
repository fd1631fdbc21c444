//! A session on the local Cassandra, for creating tables and reading rows back.

use std::collections::BTreeMap;

use scylla::client::session::Session;
use wal_clusters::cql::CqlPlace;

use crate::cql_rows;
use crate::stack::{cql_nodes, unique};

/// The keyspace the tests' tables live in.
pub const KEYSPACE: &str = "wal_consumer_test";

/// A session on the local Cassandra, for creating tables and reading rows back.
#[derive(Debug)]
pub struct Cql {
    pub session: Session,
}

impl Cql {
    pub async fn connect() -> Self {
        Self::connect_to(CqlPlace {
            nodes: cql_nodes(),
            ..CqlPlace::default()
        })
        .await
    }

    /// A session on the Cassandra at `place` (with its login, if it has one).
    pub async fn connect_to(place: CqlPlace) -> Self {
        let session = place
            .session_builder(std::time::Duration::from_secs(5), None)
            .expect("the CQL TLS CA")
            .build()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "connect to Cassandra at {:?} (scripts/stack up): {e}",
                    place.nodes
                )
            });
        session
            .query_unpaged(crate::stack::create_keyspace(KEYSPACE), &[])
            .await
            .unwrap();
        Self { session }
    }

    /// A new table `(id text PRIMARY KEY, value text)`.
    pub async fn table(&self) -> String {
        let name = unique("t").replace('-', "_");
        let create = format!("CREATE TABLE {KEYSPACE}.{name} (id text PRIMARY KEY, value text)");
        self.session.query_unpaged(create, &[]).await.unwrap();
        name
    }

    /// Every row of a [`Cql::table`] as id -> value.
    pub async fn rows(&self, table: &str) -> BTreeMap<String, Option<String>> {
        let select = format!("SELECT id, value FROM {KEYSPACE}.{table}");
        cql_rows::select(&self.session, select, ())
            .await
            .rows::<(String, Option<String>)>()
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// The write time of a row's value.
    pub async fn writetime(&self, table: &str, id: &str) -> Option<i64> {
        let select = format!("SELECT WRITETIME(value) FROM {KEYSPACE}.{table} WHERE id = ?");
        cql_rows::select(&self.session, select, (id,))
            .await
            .maybe_first_row::<(Option<i64>,)>()
            .unwrap()
            .and_then(|(t,)| t)
    }
}

impl Cql {
    /// How many rows a table holds (cheaper than reading them while a test polls).
    pub async fn count(&self, table: &str) -> i64 {
        let select = format!("SELECT COUNT(*) FROM {KEYSPACE}.{table}");
        let rows = cql_rows::select(&self.session, select, ()).await;
        rows.first_row::<(i64,)>().unwrap().0
    }
}
