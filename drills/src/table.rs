//! One row per drill, and the table the program prints at the end.

use wal_namespaces::Backend;

use crate::load::Outcome;

#[derive(Debug)]
pub struct Row {
    pub drill: &'static str,
    pub backend: Backend,
    /// The faults injected, in a few words.
    pub faults: String,
    pub outcome: Outcome,
    /// What the drill measures besides the answers (memory, throughput, shed writes...).
    pub notes: String,
    /// The drill's own promises that did not hold (beyond TRUE lost and FALSE applied).
    pub broken: Vec<String>,
}

impl Row {
    /// Every promise that did not hold, the answers' first. A drill no write of which was
    /// answered TRUE fails too: it lost nothing because it stored nothing, and its recovery
    /// (every TRUE write applied) held at once, vacuously.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.outcome.answered.get("true").copied().unwrap_or(0) == 0 {
            failures.push("no write was answered TRUE: the drill checked nothing".to_owned());
        }
        if self.outcome.true_lost > 0 {
            failures.push(format!(
                "{} writes answered TRUE were never applied",
                self.outcome.true_lost
            ));
        }
        if self.outcome.false_applied > 0 {
            failures.push(format!(
                "{} writes answered FALSE or shed were applied",
                self.outcome.false_applied
            ));
        }
        if self.outcome.recovered.is_none() {
            failures.push("the TRUE writes were not all applied within 600 s".to_owned());
        }
        failures.extend(self.broken.iter().cloned());
        failures
    }
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn print(rows: &[Row]) {
    println!(
        "| drill | backend | faults | writes | TRUE | FALSE | UNKNOWN | shed | refused or no answer | TRUE never applied | FALSE or shed applied | duplicates applied | faults over to all TRUE applied | also measured |"
    );
    println!(
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for row in rows {
        let o = &row.outcome;
        let n = |k: &str| thousands(o.answered.get(k).copied().unwrap_or(0));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | **{}** | **{}** | {} | {} | {} |",
            row.drill,
            row.backend,
            row.faults,
            thousands(o.written),
            n("true"),
            n("false"),
            n("unknown"),
            n("shed"),
            n("refused"),
            o.true_lost,
            o.false_applied,
            o.duplicates.map_or("n/a (upserts)".to_owned(), thousands),
            o.recovered
                .map_or("not within 600 s".to_owned(), |d| format!(
                    "{:.1} s",
                    d.as_secs_f64()
                )),
            row.notes,
        );
    }
}
