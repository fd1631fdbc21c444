//! StartRedrive and GetRedrive: redrives run by the control plane, one per namespace at a time.

use std::num::NonZeroU32;

use tonic::{Request, Response, Status};
use wal_proto::v1::{GetRedriveRequest, Redrive, StartRedriveRequest};
use wal_runtime::tls::Peer;

use super::dead_letters::{dlq_status, filter_of};
use super::dlq::Filter;
use super::dlq::redrive::{Progress, RedriveSettings, Report, redrive};
use super::redrive_job::Job;
use super::redrives::{RUNNING, RedriveAsk, RedriveProgress, RedriveRecord, SavedPositions};
use super::{Call, OperationsService, actor};
use crate::service::{now_micros, store_status};

/// Entries a second when the request names no rate, and the most it may name.
const DEFAULT_RATE: u32 = 50;
const MOST_RATE: u32 = 100_000;
const DEFAULT_MAX_REDRIVES: u32 = 3;

impl OperationsService {
    pub(super) async fn start_redrive_call(
        &self,
        request: Request<StartRedriveRequest>,
    ) -> Result<Response<Redrive>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let asked = filter_of(request.filter.as_ref())?;
        let rate = match request.rate {
            0 => DEFAULT_RATE,
            rate if rate <= MOST_RATE => rate,
            rate => {
                return Err(Status::invalid_argument(format!(
                    "rate {rate} is more than {MOST_RATE} entries a second"
                )));
            }
        };
        let max_redrives = request.max_redrives.unwrap_or(DEFAULT_MAX_REDRIVES);
        let text = request.filter_text.trim();
        let filter_key = if text.is_empty() {
            asked.key()
        } else {
            format!("as written: {text}")
        };
        let call = Call {
            actor: actor(peer.as_ref(), &request.operator),
            verb: "redrive",
            namespace: request.namespace.clone(),
            subject: String::new(),
            detail: format!(
                "{} at {rate}/s, at most {max_redrives} redrives an entry{}",
                if text.is_empty() {
                    asked.key()
                } else {
                    text.to_owned()
                },
                if request.from_start {
                    ", from the start"
                } else {
                    ""
                }
            ),
        };
        let namespace = self.namespace(&request.namespace).await?;
        if request.dry_run {
            self.check_reader(peer.as_ref())?;
        } else {
            self.check_admin(peer.as_ref(), &namespace, &call).await?;
        }
        let saved = if request.from_start {
            None
        } else {
            self.store
                .redrive_positions(&namespace.name, &filter_key)
                .await
                .map_err(store_status)?
        };
        // A filter written as "the last 2 hours" means what it meant when first used.
        let saved = saved.unwrap_or(SavedPositions {
            since_micros: asked.since_micros,
            until_micros: asked.until_micros,
            ..SavedPositions::default()
        });
        let filter = Filter {
            since_micros: saved.since_micros,
            until_micros: saved.until_micros,
            class: asked.class,
        };
        let settings = RedriveSettings {
            filter: filter.clone(),
            rate: NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN),
            max_redrives,
            dry_run: request.dry_run,
        };
        let dead = self.dead_letters(&namespace.name).await?;
        let now = now_micros();
        let mut record = RedriveRecord {
            namespace: namespace.name.clone(),
            id: uuid::Uuid::now_v7().to_string(),
            state: RUNNING.to_owned(),
            started_by: call.actor.clone(),
            started_at_micros: now,
            updated_at_micros: now,
            finished_at_micros: 0,
            ask: RedriveAsk {
                filter,
                filter_text: text.to_owned(),
                filter_key,
                rate,
                max_redrives,
            },
            progress: RedriveProgress {
                redriven_before: saved.redriven,
                ..RedriveProgress::default()
            },
        };
        if request.dry_run {
            let mut positions = saved.positions.clone();
            let report = redrive(&dead, &settings, &mut positions, &mut Quiet, &self.stopping)
                .await
                .map_err(dlq_status)?;
            record.state = "dry run".to_owned();
            record.id.clear();
            record.finished_at_micros = now_micros();
            record.progress.read = report.read;
            record.progress.left = report
                .passed
                .iter()
                .map(|(reason, count)| ((*reason).to_owned(), *count))
                .collect();
            return Ok(Response::new(redrive_message(&record)));
        }
        if let Some(running) = self
            .store
            .claim_redrive(&record)
            .await
            .map_err(store_status)?
        {
            let refusal = running_refusal(&running);
            self.record(&call, &format!("refused: {refusal}")).await;
            return Err(Status::failed_precondition(refusal));
        }
        self.record(&call, &format!("started {}", record.id)).await;
        tracing::info!(namespace = %record.namespace, redrive = %record.id, started_by = %record.started_by, "redrive started");
        let job = Job {
            store: self.store.clone(),
            record: record.clone(),
            dead,
            settings,
            saved,
            stop: self.stopping.child_token(),
            call,
        };
        self.jobs.spawn(job.run());
        Ok(Response::new(redrive_message(&record)))
    }

    pub(super) async fn get_redrive_call(
        &self,
        request: Request<GetRedriveRequest>,
    ) -> Result<Response<Redrive>, Status> {
        self.check_reader(request.extensions().get::<Peer>())?;
        let namespace = request.into_inner().namespace;
        match self.store.redrive(&namespace).await.map_err(store_status)? {
            Some(record) => Ok(Response::new(redrive_message(&record))),
            None => Err(Status::not_found(format!(
                "namespace '{namespace}' has had no redrive through the control plane"
            ))),
        }
    }
}

/// Why a second redrive of a namespace is refused: the one running, named.
fn running_refusal(running: &RedriveRecord) -> String {
    let counts = &running.progress;
    format!(
        "a redrive of namespace '{}' is running: {}, started by {} at {}, {} of {} read, {} redriven; follow it (walctl dlq status {}) or wait for it to end",
        running.namespace,
        running.id,
        running.started_by,
        when(running.started_at_micros),
        counts.read,
        counts.found,
        counts.redriven,
        running.namespace
    )
}

fn when(micros: i64) -> String {
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_micros(u64::try_from(micros).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

pub(super) fn redrive_message(record: &RedriveRecord) -> Redrive {
    let counts = &record.progress;
    Redrive {
        id: record.id.clone(),
        namespace: record.namespace.clone(),
        state: record.state.clone(),
        started_by: record.started_by.clone(),
        started_at_micros: record.started_at_micros,
        updated_at_micros: record.updated_at_micros,
        finished_at_micros: record.finished_at_micros,
        filter: Some(record.ask.filter.to_proto()),
        filter_text: record.ask.filter_text.clone(),
        rate: record.ask.rate,
        max_redrives: record.ask.max_redrives,
        found: counts.found,
        read: counts.read,
        redriven: counts.redriven,
        redriven_before: counts.redriven_before,
        left: counts.left.clone().into_iter().collect(),
        error: counts.error.clone(),
    }
}

/// A dry run's progress: nothing to keep.
struct Quiet;

impl Progress for Quiet {
    fn found(&mut self, _more: u64) {}

    fn read(&mut self, _report: &Report) {}

    async fn save(
        &mut self,
        _positions: &super::dlq::redrive::Positions,
        _redriven: u64,
    ) -> Result<(), super::dlq::DlqError> {
        Ok(())
    }

    fn warn(&mut self, message: String) {
        tracing::warn!("redrive dry run: {message}");
    }
}
