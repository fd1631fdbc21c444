//! StartReplay: a range of the namespace's history put back on its queues, run as a redrive is
//! (`redrive_calls`: one of the two per namespace at a time, progress kept, audited), reading
//! the namespace's own Kafka queues instead of its DLQs (`dlq::history`).

use tonic::{Request, Response, Status};
use wal_namespaces::Backend;
use wal_proto::v1::{Redrive, StartReplayRequest};
use wal_runtime::tls::Peer;

use super::dead_letters::dlq_status;
use super::destinations;
use super::dlq::history::{self, ReplaySettings};
use super::redrive_calls::{Started, rate_of, running};
use super::redrives::{RedriveAsk, ReplayAsk};
use super::{Call, OperationsService, actor, when};
use crate::service::{now_micros, store_status};

/// Entries a second when the request names no rate: a replay restores a table, so faster than
/// a redrive's trickle to a target that just came back; the consumers' own limits still hold.
const DEFAULT_RATE: u32 = 1_000;

impl OperationsService {
    pub(super) async fn start_replay_call(
        &self,
        request: Request<StartReplayRequest>,
    ) -> Result<Response<Redrive>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let ask = ask_of(&request)?;
        let rate = rate_of(request.rate, DEFAULT_RATE)?;
        let call = Call {
            actor: actor(peer.as_ref(), &request.operator),
            verb: "replay",
            namespace: request.namespace.clone(),
            subject: String::new(),
            detail: format!(
                "{} at {rate}/s{}",
                describe(&ask, request.to_micros == 0),
                if request.from_start {
                    ", from the start"
                } else {
                    ""
                }
            ),
        };
        let namespace = self.namespace(&request.namespace).await?;
        if let Some(destination) = &ask.destination {
            let names = destinations::names(&namespace, &self.region)
                .map_err(|e| Status::failed_precondition(e.to_string()))?;
            if !names.contains(destination) {
                return Err(Status::invalid_argument(format!(
                    "namespace '{}' has no destination '{destination}'; its destinations: {}",
                    namespace.name,
                    names.join(", ")
                )));
            }
        }
        if request.dry_run {
            self.check_reader(peer.as_ref())?;
        } else {
            self.check_admin(peer.as_ref(), &namespace, &call).await?;
        }
        if let Some(queue) = namespace.queues.iter().find(|q| q.backend == Backend::Sqs) {
            return Err(Status::failed_precondition(format!(
                "namespace '{}' has an SQS queue ('{}'), which deletes what was consumed: its replay reads the namespace's archive, which walctl runs (walctl replay --direct)",
                namespace.name, queue.name
            )));
        }
        let dead = self.dead_letters(&namespace).await?;
        // Named by the request as asked (`to` 0: "now"), so the same request continues the
        // progress of the last, with the end that one resolved to (`resume_point`).
        let filter_key = format!(
            "replay from={} to={} key={:?} origin_region={:?} destination={:?} excluded={} sha256={}",
            ask.from_micros,
            request.to_micros,
            ask.key,
            ask.origin_region,
            ask.destination,
            ask.excluded.len(),
            digest(&ask.excluded)
        );
        let record = running(
            &namespace.name,
            &call,
            RedriveAsk {
                filter_key,
                rate,
                replay: Some(ask),
                ..RedriveAsk::default()
            },
        );
        // A range retention cut is refused now, before the lock is taken or anything put back
        // (a resumed replay is checked against what it still needs, as it starts).
        let saved = self
            .store
            .redrive_positions(&record.namespace, &record.ask.filter_key)
            .await
            .map_err(store_status)?;
        if saved.is_none() || request.from_start {
            let replay = replay_settings(record.ask.replay.as_ref());
            for stream in dead.history() {
                if let Err(gone) = history::check_range(&dead, &stream, &replay).await {
                    let status = dlq_status(gone);
                    if !request.dry_run {
                        self.record(&call, &format!("refused: {}", status.message()))
                            .await;
                    }
                    return Err(status);
                }
            }
        }
        let started = Started {
            record,
            dead,
            from_start: request.from_start,
            call,
        };
        self.start(started, request.dry_run).await
    }
}

/// The settings a replay of `ask` runs with (the range alone matters to a retention check).
fn replay_settings(ask: Option<&ReplayAsk>) -> ReplaySettings {
    ask.map(|ask| ReplaySettings {
        from_micros: ask.from_micros,
        to_micros: ask.to_micros,
        ..ReplaySettings::default()
    })
    .unwrap_or_default()
}

/// The range and filters asked for, checked: a start, an end after it (none: now), ids
/// trimmed, sorted and each once.
fn ask_of(request: &StartReplayRequest) -> Result<ReplayAsk, Status> {
    if request.from_micros <= 0 {
        return Err(Status::invalid_argument(
            "from_micros must name the range's start (the restored backup's time, less a margin), in microseconds since the Unix epoch",
        ));
    }
    let to_micros = match request.to_micros {
        0 => now_micros(),
        to => to,
    };
    if request.from_micros >= to_micros {
        return Err(Status::invalid_argument(format!(
            "from_micros ({}) must be before to_micros ({to_micros}); nothing is in that range",
            request.from_micros
        )));
    }
    let mut excluded: Vec<String> = request
        .exclude_ids
        .iter()
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
        .collect();
    excluded.sort();
    excluded.dedup();
    let given = |text: &str| (!text.is_empty()).then(|| text.to_owned());
    Ok(ReplayAsk {
        from_micros: request.from_micros,
        to_micros,
        excluded,
        key: given(&request.key),
        origin_region: given(&request.origin_region),
        destination: given(request.destination.trim()),
    })
}

/// The SHA-256 of the sorted ids, one a line, in hex: a key of fixed length (a store's index
/// takes a few kilobytes at most) that differs for any other set of ids.
fn digest(ids: &[String]) -> String {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    for id in ids {
        hasher.update(id.as_bytes());
        hasher.update(b"\n");
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The ask as the audit trail says it.
fn describe(ask: &ReplayAsk, to_now: bool) -> String {
    let mut said = format!(
        "written from {} to {}",
        when(ask.from_micros),
        if to_now {
            "now".to_owned()
        } else {
            when(ask.to_micros)
        }
    );
    if !ask.excluded.is_empty() {
        said.push_str(&format!(", {} ids left out", ask.excluded.len()));
    }
    if let Some(key) = &ask.key {
        said.push_str(&format!(", key {key:?}"));
    }
    if let Some(region) = &ask.origin_region {
        said.push_str(&format!(", first written in {region}"));
    }
    if let Some(destination) = &ask.destination {
        said.push_str(&format!(", to destination {destination} alone"));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_needs_a_start_before_its_end_and_ids_are_kept_once() {
        let mut request = StartReplayRequest {
            namespace: "orders".into(),
            from_micros: 0,
            ..StartReplayRequest::default()
        };
        let refused = ask_of(&request).unwrap_err();
        assert!(refused.message().contains("from_micros"), "{refused}");
        request.from_micros = 2_000;
        request.to_micros = 1_000;
        let refused = ask_of(&request).unwrap_err();
        assert!(refused.message().contains("must be before"), "{refused}");
        request.to_micros = 0;
        request.exclude_ids = vec![" b ".into(), "a".into(), "b".into(), String::new()];
        let ask = ask_of(&request).unwrap();
        assert_eq!(ask.excluded, ["a", "b"]);
        assert!(ask.to_micros > 2_000, "0: now");
        assert_eq!((ask.key, ask.origin_region), (None, None));
    }
}
