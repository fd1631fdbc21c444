//! StartRedrive and GetRedrive: redrives run by the control plane, one per namespace at a time.

use std::num::NonZeroU32;

use tonic::{Request, Response, Status};
use wal_proto::v1::{GetRedriveRequest, Redrive, ReplayRange, StartRedriveRequest};
use wal_runtime::tls::Peer;

use super::dead_letters::{dlq_status, filter_of};
use super::dlq::Filter;
use super::dlq::history::ReplaySettings;
use super::dlq::redrive::{Progress, RedriveSettings, Report, redrive};
use super::redrive_job::Job;
use super::redrives::{RUNNING, RedriveAsk, RedriveProgress, RedriveRecord, SavedPositions};
use super::{Call, OperationsService, actor, when};
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
        let rate = rate_of(request.rate, DEFAULT_RATE)?;
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
        let dead = self.dead_letters(&namespace).await?;
        let ask = RedriveAsk {
            filter: asked,
            filter_text: text.to_owned(),
            filter_key,
            rate,
            max_redrives,
            replay: None,
        };
        let started = Started {
            record: running(&namespace.name, &call, ask),
            dead,
            from_start: request.from_start,
            call,
        };
        self.start(started, request.dry_run).await
    }

    /// Runs `started` (a redrive or a replay), or with `dry_run`, counts what it would take.
    pub(super) async fn start(
        &self,
        started: Started,
        dry_run: bool,
    ) -> Result<Response<Redrive>, Status> {
        if dry_run {
            self.dry_run(started).await
        } else {
            self.run_redrive(started).await
        }
    }

    /// The progress kept for the redrive's filter (none with `from_start`), and the filter with
    /// the bounds it was first used with: "the last 2 hours" means what it meant then (a
    /// replay's end, likewise: its `to` is set to the one its first run resolved).
    async fn resume_point(
        &self,
        record: &mut RedriveRecord,
        from_start: bool,
    ) -> Result<(SavedPositions, Filter), Status> {
        let asked = &record.ask.filter;
        let saved = if from_start {
            None
        } else {
            self.store
                .redrive_positions(&record.namespace, &record.ask.filter_key)
                .await
                .map_err(store_status)?
        };
        let replay_to = record.ask.replay.as_ref().map(|replay| replay.to_micros);
        let saved = saved.unwrap_or(SavedPositions {
            since_micros: asked.since_micros,
            until_micros: replay_to.or(asked.until_micros),
            ..SavedPositions::default()
        });
        if let Some(replay) = &mut record.ask.replay {
            replay.to_micros = saved.until_micros.unwrap_or(replay.to_micros);
            return Ok((saved, Filter::default()));
        }
        let filter = Filter {
            since_micros: saved.since_micros,
            until_micros: saved.until_micros,
            class: asked.class,
        };
        Ok((saved, filter))
    }

    /// Counts what a redrive (or replay) would take, changing nothing.
    async fn dry_run(&self, started: Started) -> Result<Response<Redrive>, Status> {
        let Started {
            mut record,
            dead,
            from_start,
            ..
        } = started;
        let (saved, filter) = self.resume_point(&mut record, from_start).await?;
        let settings = settings(&record, filter, true);
        let mut positions = saved.positions;
        let report = redrive(&dead, &settings, &mut positions, &mut Quiet, &self.stopping)
            .await
            .map_err(dlq_status)?;
        record.state = "dry run".to_owned();
        record.id.clear();
        record.finished_at_micros = now_micros();
        record.progress.read = report.read;
        record.progress.redriven_before = saved.redriven;
        record.progress.excluded_unseen = report.excluded_unseen.clone();
        record.progress.left = report
            .passed
            .iter()
            .map(|(reason, count)| ((*reason).to_owned(), *count))
            .collect();
        Ok(Response::new(redrive_message(&record)))
    }

    /// Claims the namespace's redrive for `started` (a redrive or a replay; refused while
    /// another runs), then starts it in the background from the progress its filter has kept.
    async fn run_redrive(&self, started: Started) -> Result<Response<Redrive>, Status> {
        let Started {
            mut record,
            dead,
            from_start,
            call,
        } = started;
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
        // Read once the claim is this redrive's: one with the same filter that ended just
        // before has saved all its progress by then.
        let resumed = self.resume_point(&mut record, from_start).await;
        let (saved, filter) = match resumed {
            Ok(point) => point,
            Err(status) => {
                self.end_claim(&mut record, &call, status.message()).await;
                return Err(status);
            }
        };
        record.ask.filter = filter.clone();
        record.progress.redriven_before = saved.redriven;
        if let Err(error) = self.store.update_redrive(&record).await {
            self.end_claim(&mut record, &call, &error.to_string()).await;
            return Err(store_status(error));
        }
        self.record(&call, &format!("started {}", record.id)).await;
        tracing::info!(namespace = %record.namespace, redrive = %record.id, started_by = %record.started_by, verb = call.verb, "redrive started");
        let job = Job {
            store: self.store.clone(),
            settings: settings(&record, filter, false),
            record: record.clone(),
            dead,
            saved,
            stop: self.stopping.child_token(),
            call,
        };
        self.jobs.spawn(job.run());
        Ok(Response::new(redrive_message(&record)))
    }

    /// A claimed redrive that could not start: recorded failed (else it would hold the lock
    /// until stale), and audited.
    async fn end_claim(&self, record: &mut RedriveRecord, call: &Call, why: &str) {
        record.state = "failed".to_owned();
        record.progress.error = why.to_owned();
        record.updated_at_micros = now_micros();
        record.finished_at_micros = record.updated_at_micros;
        if let Err(error) = self.store.update_redrive(record).await {
            tracing::warn!(namespace = %record.namespace, %error, "a redrive that could not start is left running until it is stale");
        }
        self.record(call, &format!("failed {}: {why}", record.id))
            .await;
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
                "namespace '{namespace}' has had no redrive or replay through the control plane"
            ))),
        }
    }
}

/// A redrive (or replay) asked for, checked and authorized, not yet claimed or run.
pub(super) struct Started {
    pub(super) record: RedriveRecord,
    pub(super) dead: super::dlq::DeadLetters,
    pub(super) from_start: bool,
    pub(super) call: Call,
}

/// A new redrive or replay of `namespace`, running, started by `call`'s actor.
pub(super) fn running(namespace: &str, call: &Call, ask: RedriveAsk) -> RedriveRecord {
    let now = now_micros();
    RedriveRecord {
        namespace: namespace.to_owned(),
        id: uuid::Uuid::now_v7().to_string(),
        state: RUNNING.to_owned(),
        started_by: call.actor.clone(),
        started_at_micros: now,
        updated_at_micros: now,
        finished_at_micros: 0,
        ask,
        progress: RedriveProgress::default(),
    }
}

/// The rate a request asked for: `default` for 0, refused past [`MOST_RATE`].
pub(super) fn rate_of(asked: u32, default: u32) -> Result<u32, Status> {
    match asked {
        0 => Ok(default),
        rate if rate <= MOST_RATE => Ok(rate),
        rate => Err(Status::invalid_argument(format!(
            "rate {rate} is more than {MOST_RATE} entries a second"
        ))),
    }
}

fn settings(record: &RedriveRecord, filter: Filter, dry_run: bool) -> RedriveSettings {
    RedriveSettings {
        filter,
        rate: NonZeroU32::new(record.ask.rate).unwrap_or(NonZeroU32::MIN),
        max_redrives: record.ask.max_redrives,
        dry_run,
        replay: record.ask.replay.as_ref().map(|replay| ReplaySettings {
            from_micros: replay.from_micros,
            to_micros: replay.to_micros,
            excluded: replay.excluded.iter().cloned().collect(),
            key: replay.key.clone(),
            origin_region: replay.origin_region.clone(),
            now_micros: now_micros(),
            destination: replay.destination.clone(),
        }),
    }
}

/// Why a second redrive or replay of a namespace is refused: the one running, named.
fn running_refusal(running: &RedriveRecord) -> String {
    let counts = &running.progress;
    let (what, done) = if running.ask.replay.is_some() {
        ("replay", "replayed")
    } else {
        ("redrive", "redriven")
    };
    format!(
        "a {what} of namespace '{}' is running: {}, started by {} at {}, {} of {} read, {} {done}; follow it (walctl dlq status {}) or wait for it to end",
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
        filter: record
            .ask
            .replay
            .is_none()
            .then(|| record.ask.filter.to_proto()),
        filter_text: record.ask.filter_text.clone(),
        rate: record.ask.rate,
        max_redrives: record.ask.max_redrives,
        found: counts.found,
        read: counts.read,
        redriven: counts.redriven,
        redriven_before: counts.redriven_before,
        left: counts.left.clone().into_iter().collect(),
        error: counts.error.clone(),
        replay: record.ask.replay.as_ref().map(|replay| ReplayRange {
            from_micros: replay.from_micros,
            to_micros: replay.to_micros,
            excluded: u32::try_from(replay.excluded.len()).unwrap_or(u32::MAX),
            key: replay.key.clone().unwrap_or_default(),
            origin_region: replay.origin_region.clone().unwrap_or_default(),
            excluded_not_read: counts.excluded_unseen.clone(),
            destination: replay.destination.clone().unwrap_or_default(),
        }),
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
