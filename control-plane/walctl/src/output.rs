//! Printing results: a table for people, JSON for scripts.

use std::time::{Duration, UNIX_EPOCH};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use serde_json::{Value, json};
use wal_proto::v1::NamespaceVersion;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

pub fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().copied());
    table
}

/// A progress bar with `template` for people at a terminal (indicatif hides it when stderr is
/// not one); none for JSON output, which scripts read.
pub fn progress(format: Format, template: &str) -> indicatif::ProgressBar {
    let bar = match format {
        Format::Table => indicatif::ProgressBar::new(0),
        Format::Json => indicatif::ProgressBar::hidden(),
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// A version as JSON: its metadata, and its config as a JSON value rather than a string.
pub fn version_json(version: &NamespaceVersion) -> Value {
    let config = serde_json::from_str::<Value>(&version.config_json).unwrap_or(Value::Null);
    json!({
        "name": version.name,
        "version": version.version,
        "deleted": version.deleted,
        "author": version.author,
        "created_at": when(version.created_at_micros),
        "changes": version.changes,
        "config": config,
    })
}

/// A timestamp in RFC 3339, UTC, to the second.
pub fn when(micros: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_micros(u64::try_from(micros).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

pub fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

#[cfg(test)]
mod tests {
    use super::when;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(when(0), "1970-01-01T00:00:00Z");
        assert_eq!(when(1_795_343_696_000_000), "2026-11-22T10:34:56Z");
        assert_eq!(when(951_782_400_000_000), "2000-02-29T00:00:00Z");
    }
}
