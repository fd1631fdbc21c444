//! Reading a Prometheus text exposition (what every service here serves on its metrics port):
//! what `walctl breakers` and the console read from the consumers. Label values are quoted and
//! escaped (`\\`, `\"`, `\n`) and may hold commas and `=`: endpoints such as
//! `cache/h1:11211,h2:11211` do, which the parser crates at hand split apart.

use std::collections::BTreeMap;

/// One sample: the metric's name, its labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }
}

/// The samples of `text`; comments and blank lines are skipped. A line that is not a sample
/// is refused, naming its number and what was expected there, so a page that is not an
/// exposition (an HTML error page, another service's port) is not read as "no samples".
pub fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let sample = sample(line).map_err(|expected| {
            let shown: String = line.chars().take(80).collect();
            format!("line {}: expected {expected}, found '{shown}'", index + 1)
        })?;
        samples.push(sample);
    }
    Ok(samples)
}

/// `name{label="value",...} value [timestamp]`; on a mistake, what was expected.
fn sample(line: &str) -> Result<Sample, &'static str> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("a metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inside) = rest.strip_prefix('{') {
        rest = labels_of(inside, &mut labels)?;
    }
    let value = rest
        .split_whitespace()
        .next()
        .ok_or("a value after the metric")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().map_err(|_| "a number as the value")?,
    };
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Reads `label="value",...}` into `labels`; what follows the closing brace.
fn labels_of<'a>(
    mut rest: &'a str,
    labels: &mut BTreeMap<String, String>,
) -> Result<&'a str, &'static str> {
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Ok(after);
        }
        let (name, after) = rest.split_once('=').ok_or("label=\"value\"")?;
        let mut chars = after
            .strip_prefix('"')
            .ok_or("a quoted label value")?
            .char_indices();
        let mut value = String::new();
        let end = loop {
            match chars.next().ok_or("a closing quote")? {
                (at, '"') => break at,
                (_, '\\') => match chars.next().ok_or("an escaped character")?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        labels.insert(name.trim().to_owned(), value);
        rest = after[1 + end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_keep_their_commas_equals_and_escapes() {
        let text = "# TYPE wal_consumer_breaker_open gauge\n\
            wal_consumer_breaker_open{endpoint=\"cache/h1:11211,h2:11211\"} 1\n\
            \n\
            wal_x{a=\"k=v\",b=\"say \\\"hi\\\"\\n\", c=\"back\\\\slash\",} 2.5 1700000000000\n\
            up 1\n";
        let samples = parse(text).unwrap();
        assert_eq!(samples.len(), 3);
        assert_eq!(
            samples[0].label("endpoint"),
            Some("cache/h1:11211,h2:11211")
        );
        assert_eq!(samples[0].value, 1.0);
        assert_eq!(samples[1].label("a"), Some("k=v"));
        assert_eq!(samples[1].label("b"), Some("say \"hi\"\n"));
        assert_eq!(samples[1].label("c"), Some("back\\slash"));
        assert_eq!(samples[1].value, 2.5);
        assert_eq!(samples[2].name, "up");
        assert!(samples[2].labels.is_empty());
    }

    #[test]
    fn a_page_that_is_not_an_exposition_is_refused_saying_where() {
        let refused = parse("<!doctype html>\n<html>").unwrap_err();
        assert!(
            refused.starts_with("line 1: expected a metric name"),
            "{refused}"
        );
        let refused = parse("ok 1\nbad{a=\"x} 1\n").unwrap_err();
        assert!(
            refused.starts_with("line 2: expected a closing quote"),
            "{refused}"
        );
        let refused = parse("m{a=\"x\"} many\n").unwrap_err();
        assert!(refused.contains("a number as the value"), "{refused}");
    }

    #[test]
    fn infinities_are_numbers() {
        let samples = parse("h_bucket{le=\"+Inf\"} +Inf\n").unwrap();
        assert_eq!(samples[0].value, f64::INFINITY);
        assert_eq!(samples[0].label("le"), Some("+Inf"));
    }
}
