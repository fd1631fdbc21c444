//! Series that end. The metrics of something that stops while the process goes on (a
//! destination region removed by hot reload) must leave the scrape when it stops; otherwise its
//! last values stay for ever, and a lag alert on a region that is gone never clears. The
//! Prometheus recorder cannot delete a series (metrics-rs/metrics#243), so whatever registers such
//! metrics holds a [`SeriesGuard`] for their labels, and the scrape leaves out every sample whose
//! labels include a set that nobody holds any more. Holding the set again (the region added
//! back) brings its series back, counters where they were.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

use metrics_exporter_prometheus::formatting::{sanitize_label_key, sanitize_label_value};

/// A label set, as the scrape writes it: sanitized keys and values, sorted by key.
type LabelSet = Vec<(String, String)>;

/// How many holders each label set has; a set at 0 is hidden from the scrape.
static HOLDERS: LazyLock<Mutex<HashMap<LabelSet, usize>>> = LazyLock::new(Mutex::default);

fn holders() -> MutexGuard<'static, HashMap<LabelSet, usize>> {
    // A panic elsewhere while holding the lock leaves the counts as they were: still usable.
    HOLDERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Keeps the series whose labels include a label set in the scrape while it lives.
#[derive(Debug)]
pub struct SeriesGuard {
    labels: LabelSet,
}

/// Holds `labels`: every series carrying all of them is scraped until the last guard of the
/// same set is dropped, and hidden from then on.
pub fn hold(labels: &[(&str, &str)]) -> SeriesGuard {
    let mut set: LabelSet = labels
        .iter()
        .map(|(key, value)| (sanitize_label_key(key), sanitize_label_value(value)))
        .collect();
    set.sort();
    *holders().entry(set.clone()).or_default() += 1;
    SeriesGuard { labels: set }
}

impl Drop for SeriesGuard {
    fn drop(&mut self) {
        if let Some(count) = holders().get_mut(&self.labels) {
            *count = count.saturating_sub(1);
        }
    }
}

/// `rendered` (the Prometheus text format, one blank line after each metric's block) without the
/// samples of released label sets, and without the blocks left with no sample.
pub fn scrape_filter(rendered: &str) -> String {
    let released: Vec<LabelSet> = holders()
        .iter()
        .filter(|(_, count)| **count == 0)
        .map(|(set, _)| set.clone())
        .collect();
    if released.is_empty() {
        return rendered.to_owned();
    }
    let mut out = String::with_capacity(rendered.len());
    for block in rendered.split_inclusive("\n\n") {
        let mut kept = String::with_capacity(block.len());
        let (mut samples, mut hidden) = (0, 0);
        for line in block.split_inclusive('\n') {
            if !line.starts_with('#') && !line.trim().is_empty() {
                samples += 1;
                let labels = sample_labels(line);
                if released
                    .iter()
                    .any(|set| set.iter().all(|pair| labels.contains(pair)))
                {
                    hidden += 1;
                    continue;
                }
            }
            kept.push_str(line);
        }
        if samples == 0 || hidden < samples {
            out.push_str(&kept);
        }
    }
    out
}

/// The labels of a sample line, `name{key="value",...} number`, values as written (escaped).
fn sample_labels(line: &str) -> Vec<(String, String)> {
    let Some(open) = line.find('{') else {
        return Vec::new();
    };
    let mut labels = Vec::new();
    let mut rest = &line[open + 1..];
    while let Some(eq) = rest.find("=\"") {
        let key = rest[..eq].trim_start_matches(',').to_owned();
        let value_start = &rest[eq + 2..];
        // The value ends at the first quote not escaped by a backslash.
        let mut end = None;
        let mut escaped = false;
        for (at, c) in value_start.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(at);
                    break;
                }
                _ => escaped = false,
            }
        }
        let Some(end) = end else { break };
        labels.push((key, value_start[..end].to_owned()));
        rest = &value_start[end + 1..];
        if rest.starts_with('}') {
            break;
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENDERED: &str = "# HELP lag Lag.\n# TYPE lag gauge\n\
        lag{namespace=\"n\",region=\"gone\"} 5\n\
        lag{namespace=\"n\",region=\"kept\"} 1\n\n\
        # TYPE beats counter\nbeats{namespace=\"n\",region=\"gone\"} 9\n\n\
        # TYPE other counter\nother{queue=\"a \\\"q\\\", b\"} 3\nother 4\n\n";

    #[test]
    fn a_released_set_hides_its_samples_and_blocks_left_empty() {
        // Unique label values: the holders are shared by every test of this binary.
        let rendered = RENDERED.replace("gone", "gone-1").replace("kept", "kept-1");
        let gone = hold(&[("region", "gone-1"), ("namespace", "n")]);
        let _kept = hold(&[("namespace", "n"), ("region", "kept-1")]);
        assert_eq!(scrape_filter(&rendered), rendered, "held: all scraped");
        drop(gone);
        let filtered = scrape_filter(&rendered);
        assert!(!filtered.contains("gone-1"), "{filtered}");
        assert!(filtered.contains("lag{namespace=\"n\",region=\"kept-1\"} 1\n"));
        assert!(
            !filtered.contains("# TYPE beats"),
            "empty block dropped: {filtered}"
        );
        assert!(filtered.contains("other{queue=\"a \\\"q\\\", b\"} 3\nother 4\n"));
    }

    #[test]
    fn holding_a_set_again_brings_its_series_back() {
        let rendered = RENDERED.replace("gone", "back-2");
        drop(hold(&[("namespace", "n"), ("region", "back-2")]));
        assert!(!scrape_filter(&rendered).contains("back-2"));
        let _again = hold(&[("namespace", "n"), ("region", "back-2")]);
        assert!(scrape_filter(&rendered).contains("region=\"back-2\"} 9"));
    }

    #[test]
    fn label_values_with_quotes_and_commas_are_read_whole() {
        assert_eq!(
            sample_labels("other{queue=\"a \\\"q\\\", b\",le=\"0.5\"} 3\n"),
            vec![
                ("queue".to_owned(), "a \\\"q\\\", b".to_owned()),
                ("le".to_owned(), "0.5".to_owned())
            ]
        );
        assert!(sample_labels("other 4\n").is_empty());
    }
}
