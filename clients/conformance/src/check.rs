//! A case's expectations against what the runner reported and what the platform did.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::Value;
use wal_testkit::kafka_log;

use crate::case::{Case, ResultMatch};
use crate::stage::Stage;

/// How long effects (deliveries) may take to show.
const EFFECTS_WITHIN: Duration = Duration::from_secs(30);

/// Every way the case failed; empty when it passed.
pub async fn check(case_name: &str, case: &Case, results: &[Value], stage: &Stage) -> Vec<String> {
    let mut failures = Vec::new();
    let by_place = match index(case, results) {
        Ok(by_place) => by_place,
        Err(problems) => return problems,
    };
    for matcher in &case.expect.results {
        let matched = by_place
            .keys()
            .filter(|(step, index)| {
                *step == matcher.step && matcher.index.is_none_or(|i| i == *index)
            })
            .count();
        if matched == 0 {
            failures.push(format!(
                "the case's matcher {matcher:?} matches no result: fix the case"
            ));
        }
        for ((step, index), result) in &by_place {
            if *step == matcher.step && matcher.index.is_none_or(|i| i == *index) {
                failures.extend(
                    mismatches(matcher, result)
                        .into_iter()
                        .map(|m| format!("step {step} write {index}: {m}; the result: {result}")),
                );
            }
        }
    }
    for step in &case.expect.delivered {
        failures.extend(delivered(case, step.step, &by_place, stage).await);
    }
    for step in &case.expect.queue_order {
        failures.extend(queue_order(case_name, case, step.step, &by_place, stage).await);
    }
    for step in &case.expect.transaction_applied {
        failures.extend(transaction_applied(case, step.step, stage).await);
    }
    for wanted in &case.expect.requests {
        // An alias of the case, or a label as the producer writes it (`_unknown`: requests for
        // namespaces it does not serve).
        let namespace = stage
            .namespaces
            .get(&(case_name.to_owned(), wanted.namespace.clone()))
            .map_or(wanted.namespace.as_str(), |n| n.name.as_str());
        let each = stage.requests(namespace, &wanted.outcome).await;
        let counted: u64 = each.iter().sum();
        if wanted.at_least.is_some_and(|n| counted < n)
            || wanted.at_most.is_some_and(|n| counted > n)
        {
            failures.push(format!(
                "the producers counted {counted} '{}' requests for '{}'; expected {:?} to {:?}",
                wanted.outcome, wanted.namespace, wanted.at_least, wanted.at_most
            ));
        }
        if let Some(least) = wanted.at_least_each
            && each.iter().any(|n| *n < least)
        {
            failures.push(format!(
                "the producers counted {each:?} '{}' requests for '{}' each; expected at least {least} on every producer (round robin)",
                wanted.outcome, wanted.namespace
            ));
        }
    }
    failures
}

/// The results by (step, index); every call of the plan must have exactly one.
fn index(case: &Case, results: &[Value]) -> Result<BTreeMap<(usize, usize), Value>, Vec<String>> {
    let mut by_place = BTreeMap::new();
    let mut problems = Vec::new();
    for result in results {
        let place = (
            result["step"].as_u64().unwrap_or(u64::MAX) as usize,
            result["index"].as_u64().unwrap_or(u64::MAX) as usize,
        );
        if by_place.insert(place, result.clone()).is_some() {
            problems.push(format!("two results for step {} call {}", place.0, place.1));
        }
    }
    for (step, planned) in case.steps.iter().enumerate() {
        let calls = planned["writes"].as_array().map_or(1, Vec::len);
        for index in 0..calls {
            if !by_place.contains_key(&(step, index)) {
                problems.push(format!("no result for step {step} call {index}"));
            }
        }
    }
    let planned = case.steps.len();
    for (step, index) in by_place.keys() {
        if *step >= planned {
            problems.push(format!(
                "a result for step {step} call {index}, which the plan lacks"
            ));
        }
    }
    if problems.is_empty() {
        Ok(by_place)
    } else {
        Err(problems)
    }
}

fn mismatches(matcher: &ResultMatch, result: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let text = |field: &str| result[field].as_str().unwrap_or_default().to_owned();
    let attempts = result["attempts"].as_u64().unwrap_or(0);
    let mut expect_text = |field: &str, wanted: &Option<String>| {
        if let Some(wanted) = wanted
            && &text(field) != wanted
        {
            found.push(format!("{field} is {:?}, expected {wanted:?}", text(field)));
        }
    };
    expect_text("outcome", &matcher.outcome);
    expect_text("code", &matcher.code);
    expect_text("field", &matcher.field);
    expect_text("entry_id", &matcher.entry_id);
    if matcher.attempts.is_some_and(|a| a != attempts) {
        found.push(format!(
            "attempts is {attempts}, expected {:?}",
            matcher.attempts
        ));
    }
    if matcher.min_attempts.is_some_and(|a| attempts < a) {
        found.push(format!(
            "attempts is {attempts}, expected at least {:?}",
            matcher.min_attempts
        ));
    }
    if matcher.max_attempts.is_some_and(|a| attempts > a) {
        found.push(format!(
            "attempts is {attempts}, expected at most {:?}",
            matcher.max_attempts
        ));
    }
    if let Some(wanted) = &matcher.destinations {
        let named: BTreeMap<String, String> = result["destinations"]
            .as_object()
            .map(|named| {
                let state = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                named.iter().map(|(k, v)| (k.clone(), state(v))).collect()
            })
            .unwrap_or_default();
        if &named != wanted {
            found.push(format!("destinations are {named:?}, expected {wanted:?}"));
        }
    }
    let elapsed = result["elapsed_millis"].as_u64().unwrap_or(u64::MAX);
    if matcher.max_elapsed_millis.is_some_and(|max| elapsed > max) {
        found.push(format!(
            "took {elapsed} ms, expected at most {:?}",
            matcher.max_elapsed_millis
        ));
    }
    found
}

/// The payloads of a write step's writes answered TRUE, with the entry id each was answered with.
fn true_writes(
    case: &Case,
    step: usize,
    by_place: &BTreeMap<(usize, usize), Value>,
) -> Vec<(String, String)> {
    let writes = case.steps[step]["writes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    writes
        .iter()
        .enumerate()
        .filter_map(|(index, write)| {
            let result = by_place.get(&(step, index))?;
            (result["outcome"] == "TRUE").then(|| {
                (
                    write["payload"].as_str().unwrap_or_default().to_owned(),
                    result["entry_id"].as_str().unwrap_or_default().to_owned(),
                )
            })
        })
        .collect()
}

/// Every TRUE write reached the upstream, and every copy of it carried the id it was answered
/// with: one id however many attempts stored it.
async fn delivered(
    case: &Case,
    step: usize,
    by_place: &BTreeMap<(usize, usize), Value>,
    stage: &Stage,
) -> Vec<String> {
    let wanted = true_writes(case, step, by_place);
    if wanted.is_empty() {
        return vec![format!(
            "step {step}: no write answered TRUE, so nothing can be delivered"
        )];
    }
    let ids_by_body = wait_for(stage, wanted.iter().map(|(p, _)| p.clone()).collect()).await;
    let mut failures = Vec::new();
    for (payload, id) in wanted {
        match ids_by_body.get(&payload) {
            None => failures.push(format!(
                "step {step}: '{payload}' (TRUE as {id}) never reached the target within {EFFECTS_WITHIN:?}"
            )),
            Some(ids) if ids.iter().any(|got| got != &id) => failures.push(format!(
                "step {step}: '{payload}' was answered as entry {id} but delivered under ids {ids:?}: a retry changed the idempotency id"
            )),
            Some(_) => {}
        }
    }
    failures
}

/// Waits until the upstream has a copy of each payload (or the effects' time is up); returns the
/// idempotency keys each payload was delivered with, in arrival order.
async fn wait_for(stage: &Stage, payloads: Vec<String>) -> HashMap<String, Vec<String>> {
    let started = Instant::now();
    loop {
        let mut ids: HashMap<String, Vec<String>> = HashMap::new();
        for received in stage.upstream.received() {
            let body = String::from_utf8_lossy(&received.body).into_owned();
            let id = received
                .headers
                .get("idempotency-key")
                .cloned()
                .unwrap_or_default();
            ids.entry(body).or_default().push(id);
        }
        let all = payloads.iter().all(|p| ids.contains_key(p));
        if all || started.elapsed() > EFFECTS_WITHIN {
            return ids;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// On the step namespace's queue, the first copy of each write of one key comes in the order of
/// the step's writes.
async fn queue_order(
    case_name: &str,
    case: &Case,
    step: usize,
    by_place: &BTreeMap<(usize, usize), Value>,
    stage: &Stage,
) -> Vec<String> {
    let planned = &case.steps[step];
    let alias = planned["namespace"].as_str().unwrap_or_default().to_owned();
    let namespace = &stage.namespaces[&(case_name.to_owned(), alias)];
    let writes = planned["writes"].as_array().cloned().unwrap_or_default();
    let place_of: HashMap<String, (String, usize)> = writes
        .iter()
        .enumerate()
        .filter_map(|(index, write)| {
            let id = by_place.get(&(step, index))?["entry_id"]
                .as_str()?
                .to_owned();
            Some((
                id,
                (write["key"].as_str().unwrap_or_default().to_owned(), index),
            ))
        })
        .collect();
    let log = kafka_log(&namespace.queues[0].name).await;
    let mut seen = std::collections::HashSet::new();
    let mut last: HashMap<String, usize> = HashMap::new();
    let mut failures = Vec::new();
    for entry in log {
        let Some((key, index)) = place_of.get(&entry.id) else {
            continue;
        };
        if !seen.insert(entry.id.clone()) {
            continue;
        }
        if let Some(before) = last.insert(key.clone(), *index)
            && before > *index
        {
            failures.push(format!(
                "step {step}: on the queue, write {index} of key '{key}' comes after write {before}"
            ));
        }
    }
    if seen.len() != place_of.len() {
        failures.push(format!(
            "step {step}: {} of {} answered writes are on the queue",
            seen.len(),
            place_of.len()
        ));
    }
    failures
}

/// Every item of the step's transaction reached the upstream, the first copies in sequence order.
async fn transaction_applied(case: &Case, step: usize, stage: &Stage) -> Vec<String> {
    let items: Vec<String> = case.steps[step]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|item| item["payload"].as_str().unwrap_or_default().to_owned())
        .collect();
    if items.is_empty() {
        return vec![format!(
            "step {step} has no transaction items to check: fix the case"
        )];
    }
    wait_for(stage, items.clone()).await;
    let mut first = Vec::new();
    for body in stage.upstream.bodies() {
        if items.contains(&body) && !first.contains(&body) {
            first.push(body);
        }
    }
    if first == items {
        Vec::new()
    } else {
        vec![format!(
            "step {step}: the transaction's items reached the target as {first:?}; expected all of {items:?} in that order"
        )]
    }
}
