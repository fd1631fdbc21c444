//! Where namespace configs and their versions live: one table of versions, in SQLite (embedded,
//! the default: one command runs the control plane with no server) or PostgreSQL (production).
//!
//! Both go through sqlx's `Any` driver with the same SQL, so the conformance suite in
//! `tests/store.rs` runs against both engines. Versions are never rewritten: an update or a
//! deletion adds a row, so every old version stays readable. Two writers of one namespace race on
//! the primary key (name, version): the loser gets [`StoreError::Conflict`], never a lost update.

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::migrate::{MigrateError, Migrator};
use sqlx::{AnyPool, Row as _};

/// One version of a namespace, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVersion {
    pub name: String,
    /// 1 for the first version, one more for each change.
    pub version: i64,
    /// The config as applied (JSON text); `None` for a deletion.
    pub config: Option<String>,
    pub author: String,
    pub created_at_micros: i64,
    /// What changed from the version before.
    pub changes: Vec<String>,
}

impl StoredVersion {
    pub fn is_deleted(&self) -> bool {
        self.config.is_none()
    }
}

/// A version to add: `version` must be one more than the namespace's latest (1 for a new one).
#[derive(Debug, Clone)]
pub struct NewVersion<'a> {
    pub name: &'a str,
    pub version: i64,
    pub config: Option<&'a str>,
    pub author: &'a str,
    pub created_at_micros: i64,
    pub changes: &'a [String],
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "namespace '{name}' changed while this change was prepared (version {version} exists now); read it again and retry"
    )]
    Conflict { name: String, version: i64 },
    #[error("the namespace store ({engine}) failed: {source}")]
    Database {
        engine: &'static str,
        #[source]
        source: sqlx::Error,
    },
    #[error(
        "the namespace store URL '{0}' is not understood; expected sqlite://PATH or postgres://USER@HOST:PORT/DB"
    )]
    Url(String),
    #[error(
        "the namespace store ({engine}) was migrated by a newer control plane: its migration \
         {applied} is not one this build knows (it knows 1 to {known}); run a control plane at \
         least as new as the one that migrated it (rolling back past a schema change is not \
         supported)"
    )]
    NewerSchema {
        engine: &'static str,
        applied: i64,
        known: i64,
    },
    #[error("migrating the namespace store ({engine}) failed: {source}")]
    Migrate {
        engine: &'static str,
        #[source]
        source: MigrateError,
    },
}

/// The store's schema, one migration a change, in `migrations/` (run in order, each once; sqlx
/// records them in `_sqlx_migrations`). A migration's file is never edited once released, not
/// even a space: sqlx refuses a store whose applied migration's checksum differs (so the files
/// hold SQL only, and git keeps their bytes as they are). Add the next file and its line.
///
/// 1. `namespace_versions`: every version of every namespace; a change or a deletion adds a
///    row. `IF NOT EXISTS`: a store made before migrations is taken over as it is.
/// 2. `pauses` (the pauses in force, see `operations::pauses`), `audit` (every operation, see
///    `operations::audit`), `redrives` and `redrive_positions` (see `operations::redrives`).
/// 3. `cancellations` (the entries cancelled, see `operations::cancellations`).
fn migrations() -> Migrator {
    use sqlx::SqlSafeStr as _;
    use sqlx::migrate::{Migration, MigrationType};
    let migration = |version, description: &'static str, sql: &'static str| {
        Migration::new(
            version,
            description.into(),
            MigrationType::Simple,
            sql.into_sql_str(),
            false,
        )
    };
    Migrator::with_migrations(vec![
        migration(
            1,
            "namespace versions",
            include_str!("../migrations/0001_namespace_versions.sql"),
        ),
        migration(
            2,
            "operations",
            include_str!("../migrations/0002_operations.sql"),
        ),
        migration(
            3,
            "cancellations",
            include_str!("../migrations/0003_cancellations.sql"),
        ),
    ])
}

/// The newest migration this build knows.
pub fn schema_version() -> i64 {
    migrations().iter().map(|m| m.version).max().unwrap_or(0)
}

/// A query on the versions table with every column, as a `&'static str` (sqlx takes no SQL built
/// at run time).
macro_rules! select_versions {
    ($rest:literal) => {
        concat!(
            "SELECT name, version, config, author, created_at_micros, changes FROM namespace_versions ",
            $rest
        )
    };
}

/// A query of [`select_versions!`] with its arguments bound.
type VersionsQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

#[derive(Debug, Clone)]
pub struct NamespaceStore {
    pub(crate) pool: AnyPool,
    engine: &'static str,
}

impl NamespaceStore {
    /// Opens the store at `url` (`sqlite://PATH`, created when missing, or `postgres://...`) and
    /// migrates its schema to this build's (see [`migrations`]), refusing one a newer build
    /// migrated.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (engine, url) = if let Some(path) = url.strip_prefix("sqlite://") {
            // mode=rwc: create the file on first use, so one command starts a control plane.
            let separator = if path.contains('?') { '&' } else { '?' };
            ("sqlite", format!("{url}{separator}mode=rwc"))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            ("postgres", url.to_owned())
        } else {
            return Err(StoreError::Url(url.to_owned()));
        };
        let database = |source| StoreError::Database { engine, source };
        let pool = AnyPoolOptions::new()
            // SQLite allows one writer at a time; one connection makes writers queue instead of
            // failing with "database is locked".
            .max_connections(if engine == "sqlite" { 1 } else { 8 })
            .connect(&url)
            .await
            .map_err(database)?;
        // Control planes starting at once on PostgreSQL take turns: sqlx holds an advisory lock
        // while it migrates. sqlx does not lock SQLite, the embedded store of one control
        // plane: a second one starting on the same file at once may fail here, and is
        // started again.
        migrations()
            .run(&pool)
            .await
            .map_err(|source| match source {
                MigrateError::VersionMissing(applied) => StoreError::NewerSchema {
                    engine,
                    applied,
                    known: schema_version(),
                },
                source => StoreError::Migrate { engine, source },
            })?;
        Ok(Self { pool, engine })
    }

    pub fn engine(&self) -> &'static str {
        self.engine
    }

    pub(crate) fn database(&self, source: sqlx::Error) -> StoreError {
        StoreError::Database {
            engine: self.engine,
            source,
        }
    }

    /// Adds a version. Fails with [`StoreError::Conflict`] when that version number is taken
    /// (another writer got there first) or skips one.
    pub async fn add(&self, new: NewVersion<'_>) -> Result<StoredVersion, StoreError> {
        let latest = self.latest_version(new.name).await?;
        if latest != new.version - 1 {
            return Err(StoreError::Conflict {
                name: new.name.to_owned(),
                version: latest,
            });
        }
        let changes = serde_json::to_string(new.changes).unwrap_or_else(|_| "[]".to_owned());
        let inserted = sqlx::query(
            "INSERT INTO namespace_versions (name, version, config, author, created_at_micros, changes)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(new.name)
        .bind(new.version)
        .bind(new.config)
        .bind(new.author)
        .bind(new.created_at_micros)
        .bind(&changes)
        .execute(&self.pool)
        .await;
        match inserted {
            Ok(_) => Ok(StoredVersion {
                name: new.name.to_owned(),
                version: new.version,
                config: new.config.map(str::to_owned),
                author: new.author.to_owned(),
                created_at_micros: new.created_at_micros,
                changes: new.changes.to_vec(),
            }),
            // The primary key: another writer added this version between the read and now.
            Err(sqlx::Error::Database(error)) if error.is_unique_violation() => {
                Err(StoreError::Conflict {
                    name: new.name.to_owned(),
                    version: new.version,
                })
            }
            Err(error) => Err(self.database(error)),
        }
    }

    /// The namespace's latest version number, 0 when it never existed.
    async fn latest_version(&self, name: &str) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT MAX(version) FROM namespace_versions WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        row.try_get::<Option<i64>, _>(0)
            .map(Option::unwrap_or_default)
            .map_err(|e| self.database(e))
    }

    /// The latest version of a namespace (a deletion included), if it ever existed.
    pub async fn latest(&self, name: &str) -> Result<Option<StoredVersion>, StoreError> {
        let query = select_versions!("WHERE name = $1 ORDER BY version DESC LIMIT 1");
        self.one(sqlx::query(query).bind(name)).await
    }

    /// The namespace's latest version that has a config: the current one, or for a deleted
    /// namespace the one before its deletion. A deleted namespace's queues stay on the brokers,
    /// so the update rules still judge a re-created namespace against it.
    pub async fn last_config(&self, name: &str) -> Result<Option<StoredVersion>, StoreError> {
        let query = select_versions!(
            "WHERE name = $1 AND config IS NOT NULL ORDER BY version DESC LIMIT 1"
        );
        self.one(sqlx::query(query).bind(name)).await
    }

    /// [`last_config`](Self::last_config) of every namespace, deleted ones included, by name.
    pub async fn last_configs(&self) -> Result<Vec<StoredVersion>, StoreError> {
        let query = select_versions!(
            "v WHERE config IS NOT NULL AND version = (SELECT MAX(version) FROM namespace_versions w
               WHERE w.name = v.name AND w.config IS NOT NULL)
             ORDER BY name"
        );
        self.all(sqlx::query(query)).await
    }

    /// One version of a namespace.
    pub async fn version(
        &self,
        name: &str,
        version: i64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        let query = select_versions!("WHERE name = $1 AND version = $2");
        self.one(sqlx::query(query).bind(name).bind(version)).await
    }

    /// Every version of a namespace, oldest first.
    pub async fn history(&self, name: &str) -> Result<Vec<StoredVersion>, StoreError> {
        let query = select_versions!("WHERE name = $1 ORDER BY version");
        self.all(sqlx::query(query).bind(name)).await
    }

    /// The current version of every namespace that is not deleted, by name.
    pub async fn current(&self) -> Result<Vec<StoredVersion>, StoreError> {
        let query = select_versions!(
            "v
             WHERE version = (SELECT MAX(version) FROM namespace_versions w WHERE w.name = v.name)
               AND config IS NOT NULL
             ORDER BY name"
        );
        self.all(sqlx::query(query)).await
    }

    /// The version a query selects, if any.
    async fn one(&self, query: VersionsQuery<'_>) -> Result<Option<StoredVersion>, StoreError> {
        let row = query
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        row.map(|row| self.version_of(&row)).transpose()
    }

    /// Every version a query selects, in its order.
    async fn all(&self, query: VersionsQuery<'_>) -> Result<Vec<StoredVersion>, StoreError> {
        let rows = query
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        rows.iter().map(|row| self.version_of(row)).collect()
    }

    fn version_of(&self, row: &AnyRow) -> Result<StoredVersion, StoreError> {
        let get = |e| self.database(e);
        let changes: String = row.try_get("changes").map_err(get)?;
        Ok(StoredVersion {
            name: row.try_get("name").map_err(get)?,
            version: row.try_get("version").map_err(get)?,
            config: row.try_get("config").map_err(get)?,
            author: row.try_get("author").map_err(get)?,
            created_at_micros: row.try_get("created_at_micros").map_err(get)?,
            // Written by `add` only; a row edited by hand into something else reads as no list.
            changes: serde_json::from_str(&changes).unwrap_or_default(),
        })
    }
}
