//! The JSON API the page calls: each handler makes the control plane's calls for one view or
//! action and answers what the page shows. A refusal keeps the control plane's words and maps
//! its code to HTTP (PERMISSION_DENIED 403, NOT_FOUND 404, FAILED_PRECONDITION 409, ...), so
//! the page says exactly why.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use tonic::Code;
use wal_proto::v1::{
    AccessRequest, CancelEntryRequest, DeadLetter, GetRedriveRequest, GetRequest, HistoryRequest,
    ListDeadLettersRequest, ListDestinationsRequest, ListPausesRequest, ListRequest,
    ListTransactionsRequest, NamespaceVersion, Pause, PauseRequest, Redrive, ResumeRequest,
    ShowDeadLetterRequest, StartRedriveRequest, Transaction, TransactionAbortRequest,
    TransactionListing,
};

use crate::{Consumers, ControlPlane, TraceLinks};

/// How the console records itself in the audit when its connection carries no principal.
const OPERATOR: &str = "wal-console";

/// Dead letters listed on a page at most (the counts cover all of them).
const PAGE: u32 = 200;

pub struct ApiError(tonic::Status);

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        Self(status)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self.0.code() {
            Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::FailedPrecondition | Code::Aborted | Code::AlreadyExists => StatusCode::CONFLICT,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::Unavailable | Code::DeadlineExceeded => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_GATEWAY,
        };
        let body = json!({"error": self.0.message(), "code": format!("{:?}", self.0.code())});
        (status, Json(body)).into_response()
    }
}

type Answer = Result<Json<Value>, ApiError>;

/// Every namespace, with its version, who changed it last and when, and its pauses.
pub async fn namespaces(State(control_plane): State<ControlPlane>) -> Answer {
    let listed = control_plane.registry().list(ListRequest {}).await?;
    let pauses = control_plane
        .operations()
        .list_pauses(ListPausesRequest::default())
        .await?
        .into_inner()
        .pauses;
    let rows: Vec<Value> = listed
        .into_inner()
        .namespaces
        .iter()
        .map(|v| {
            let paused: Vec<Value> = pauses
                .iter()
                .filter(|p| p.namespace == v.name)
                .map(pause_json)
                .collect();
            json!({"name": v.name, "version": v.version, "author": v.author,
                   "changed_at_micros": v.created_at_micros, "pauses": paused})
        })
        .collect();
    Ok(Json(
        json!({"control_plane": control_plane.address(), "namespaces": rows}),
    ))
}

/// One namespace: its config, history, pauses, and what the console's identity may do with it.
pub async fn namespace(
    State(control_plane): State<ControlPlane>,
    Path(name): Path<String>,
) -> Answer {
    let mut registry = control_plane.registry();
    let mut operations = control_plane.operations();
    let current = registry
        .get(GetRequest {
            name: name.clone(),
            version: 0,
        })
        .await?
        .into_inner();
    let history = registry
        .history(HistoryRequest { name: name.clone() })
        .await?
        .into_inner()
        .versions;
    let access = operations
        .access(AccessRequest {
            namespace: name.clone(),
        })
        .await?
        .into_inner();
    let pauses = operations
        .list_pauses(ListPausesRequest {
            namespace: name.clone(),
        })
        .await?
        .into_inner()
        .pauses;
    // The config as the control plane stored it; shown as text if it is somehow not JSON.
    let config: Value = serde_json::from_str(&current.config_json)
        .unwrap_or_else(|_| Value::String(current.config_json.clone()));
    Ok(Json(json!({
        "name": name,
        "version": current.version,
        "config": config,
        "history": history.iter().rev().map(version_json).collect::<Vec<_>>(),
        "access": {"principal": access.principal, "authorization": access.authorization,
                   "admin": access.admin, "write": access.write},
        "pauses": pauses.iter().map(pause_json).collect::<Vec<_>>(),
    })))
}

/// The namespace's dead letters: the total, a count per class and reason, the oldest [`PAGE`],
/// and where their traces are shown.
pub async fn dead_letters(
    State(control_plane): State<ControlPlane>,
    Extension(traces): Extension<TraceLinks>,
    Path(name): Path<String>,
) -> Answer {
    let listed = control_plane
        .operations()
        .list_dead_letters(ListDeadLettersRequest {
            namespace: name,
            filter: None,
            limit: PAGE,
        })
        .await?
        .into_inner();
    let reasons: Vec<Value> = listed
        .reasons
        .iter()
        .map(|r| {
            json!({"class": class_name(r.class), "reason": r.reason, "entries": r.entries,
                   "first_micros": r.first_micros, "last_micros": r.last_micros})
        })
        .collect();
    Ok(Json(json!({
        "total": listed.total,
        "reasons": reasons,
        "entries": listed.entries.iter().map(|d| dead_letter_json(d, false)).collect::<Vec<_>>(),
        "trace_url": traces.template(),
    })))
}

/// Every copy of one dead letter, payload included (the control plane needs admin for it).
pub async fn dead_letter(
    State(control_plane): State<ControlPlane>,
    Path((name, id)): Path<(String, String)>,
) -> Answer {
    let shown = control_plane
        .operations()
        .show_dead_letter(ShowDeadLetterRequest {
            namespace: name,
            id,
        })
        .await?
        .into_inner();
    let copies: Vec<Value> = shown
        .copies
        .iter()
        .map(|d| dead_letter_json(d, true))
        .collect();
    Ok(Json(json!({ "copies": copies })))
}

/// The namespace's running or last redrive; `null` when it never had one.
pub async fn redrive(
    State(control_plane): State<ControlPlane>,
    Path(name): Path<String>,
) -> Answer {
    let asked = GetRedriveRequest { namespace: name };
    match control_plane.operations().get_redrive(asked).await {
        Ok(redrive) => Ok(Json(redrive_json(&redrive.into_inner()))),
        Err(status) if status.code() == Code::NotFound => Ok(Json(Value::Null)),
        Err(status) => Err(status.into()),
    }
}

#[derive(Debug, Deserialize)]
pub struct RedriveAsk {
    /// Count only: what the confirmation shows before anything moves.
    #[serde(default)]
    dry_run: bool,
    /// Entries a second (0: the control plane's default, 50).
    #[serde(default)]
    rate: u32,
}

/// Starts a redrive of every dead letter of the namespace (or counts them, `dry_run`).
pub async fn start_redrive(
    State(control_plane): State<ControlPlane>,
    Path(name): Path<String>,
    Json(ask): Json<RedriveAsk>,
) -> Answer {
    let request = StartRedriveRequest {
        namespace: name,
        rate: ask.rate,
        dry_run: ask.dry_run,
        operator: OPERATOR.to_owned(),
        ..Default::default()
    };
    let started = control_plane.operations().start_redrive(request).await?;
    Ok(Json(redrive_json(&started.into_inner())))
}

/// The namespace's two-phase writes by state (open, applying, dead-lettered), each listing at
/// most [`PAGE`] (`limit` says so); `null` for a namespace without durable storage, which has
/// none.
pub async fn transactions(
    State(control_plane): State<ControlPlane>,
    Path(name): Path<String>,
) -> Answer {
    let list = |listing: TransactionListing| {
        let mut operations = control_plane.operations();
        let asked = ListTransactionsRequest {
            namespace: name.clone(),
            listing: listing.into(),
            limit: PAGE,
        };
        async move { operations.list_transactions(asked).await }
    };
    // At once: each may wait on the namespace's CQL cluster.
    let (open, applying, dead_lettered) = tokio::join!(
        list(TransactionListing::Open),
        list(TransactionListing::Applying),
        list(TransactionListing::DeadLettered)
    );
    let mut by_state = serde_json::Map::new();
    for (state, listed) in [
        ("open", open),
        ("applying", applying),
        ("dead_lettered", dead_lettered),
    ] {
        let listed = match listed {
            Ok(listed) => listed.into_inner().transactions,
            Err(status) if status.code() == Code::FailedPrecondition => {
                return Ok(Json(Value::Null));
            }
            Err(status) => return Err(status.into()),
        };
        let rows: Vec<Value> = listed.iter().map(transaction_json).collect();
        by_state.insert(state.to_owned(), Value::Array(rows));
    }
    by_state.insert("limit".to_owned(), json!(PAGE));
    Ok(Json(Value::Object(by_state)))
}

/// Where each destination of the namespace stands: its reader's lag, the newest entry applied,
/// its dead letters and gaps, and the pause holding it (regions of a replicated namespace
/// counted from the control plane's region).
pub async fn destinations(
    State(control_plane): State<ControlPlane>,
    Path(name): Path<String>,
) -> Answer {
    let listed = control_plane
        .operations()
        .list_destinations(ListDestinationsRequest {
            namespace: name,
            region: String::new(),
        })
        .await?
        .into_inner()
        .destinations;
    let rows: Vec<Value> = listed
        .iter()
        .map(|d| {
            json!({"name": d.name, "kind": d.kind, "writer": d.writer, "state": d.state,
                   "lag_entries": d.lag_entries, "lag_seconds": d.lag_seconds,
                   "last_applied_micros": d.last_applied_micros,
                   "dead_lettered": d.dead_lettered, "lost": d.lost, "gaps": d.gaps,
                   "paused": d.paused.as_ref().map(pause_json)})
        })
        .collect();
    Ok(Json(Value::Array(rows)))
}

/// What each consumer given to the console showed of the namespace at its last read: per
/// destination its counts and rates, and the consumer's open breakers.
pub async fn consumers(
    Extension(consumers): Extension<Consumers>,
    Path(name): Path<String>,
) -> Json<Value> {
    Json(consumers.view(&name))
}

#[derive(Debug, Deserialize)]
pub struct AbortAsk {
    /// Why; kept on the transaction and in the audit.
    reason: String,
}

/// Aborts an open transaction (the control plane refuses a committed one, naming its state).
pub async fn abort_transaction(
    State(control_plane): State<ControlPlane>,
    Path((name, id)): Path<(String, String)>,
    Json(ask): Json<AbortAsk>,
) -> Answer {
    let request = TransactionAbortRequest {
        namespace: name,
        transaction_id: id,
        reason: ask.reason,
        operator: OPERATOR.to_owned(),
    };
    let aborted = control_plane
        .operations()
        .abort_transaction(request)
        .await?
        .into_inner();
    Ok(Json(json!({
        "changed": aborted.changed,
        "summary": aborted.summary,
        "transaction": aborted.transaction.as_ref().map(transaction_json),
    })))
}

#[derive(Debug, Deserialize)]
pub struct PauseAsk {
    /// Empty: every destination of the namespace.
    #[serde(default)]
    destination: String,
    /// Why; shown beside the pause wherever it is listed.
    #[serde(default)]
    reason: String,
}

/// Pauses delivery of the namespace, or of one destination; the pause in force.
pub async fn pause(
    State(control_plane): State<ControlPlane>,
    Path(name): Path<String>,
    Json(ask): Json<PauseAsk>,
) -> Answer {
    let request = PauseRequest {
        namespace: name,
        destination: ask.destination,
        reason: ask.reason,
        operator: OPERATOR.to_owned(),
    };
    let paused = control_plane
        .operations()
        .pause(request)
        .await?
        .into_inner();
    Ok(Json(json!({
        "changed": paused.changed,
        "pause": paused.pause.as_ref().map(pause_json),
    })))
}

/// Ends the pause of the namespace (empty destination) or of one destination.
pub async fn resume(
    State(control_plane): State<ControlPlane>,
    Path(name): Path<String>,
    Json(ask): Json<PauseAsk>,
) -> Answer {
    let request = ResumeRequest {
        namespace: name,
        destination: ask.destination,
        operator: OPERATOR.to_owned(),
    };
    let resumed = control_plane
        .operations()
        .resume(request)
        .await?
        .into_inner();
    Ok(Json(json!({
        "changed": resumed.changed,
        "still_paused": resumed.still_paused.iter().map(pause_json).collect::<Vec<_>>(),
    })))
}

#[derive(Debug, Deserialize)]
pub struct CancelAsk {
    entry_id: String,
    #[serde(default)]
    reason: String,
}

/// Cancels one entry by its id; the control plane's answer in words (what was cancelled,
/// where it came too late).
pub async fn cancel(
    State(control_plane): State<ControlPlane>,
    Path(name): Path<String>,
    Json(ask): Json<CancelAsk>,
) -> Answer {
    let request = CancelEntryRequest {
        namespace: name,
        entry_id: ask.entry_id,
        reason: ask.reason,
        operator: OPERATOR.to_owned(),
    };
    let cancelled = control_plane
        .operations()
        .cancel_entry(request)
        .await?
        .into_inner();
    Ok(Json(json!({
        "changed": cancelled.changed,
        "summary": cancelled.summary,
    })))
}

fn transaction_json(t: &Transaction) -> Value {
    json!({
        "id": t.transaction_id, "state": t.state, "item_count": t.item_count,
        "applied_through": t.applied_through, "opened_at_micros": t.opened_at_micros,
        "committed_at_micros": t.committed_at_micros, "reason": t.reason,
    })
}

fn version_json(v: &NamespaceVersion) -> Value {
    json!({"version": v.version, "author": v.author, "at_micros": v.created_at_micros,
           "deleted": v.deleted, "changes": v.changes})
}

fn pause_json(p: &Pause) -> Value {
    json!({"destination": p.destination, "paused_by": p.paused_by,
           "paused_at_micros": p.paused_at_micros, "reason": p.reason})
}

fn class_name(class: i32) -> &'static str {
    match wal_proto::v1::ErrorClass::try_from(class) {
        Ok(wal_proto::v1::ErrorClass::Retryable) => "retryable",
        Ok(wal_proto::v1::ErrorClass::Permanent) => "permanent",
        _ => "unknown",
    }
}

fn dead_letter_json(letter: &DeadLetter, with_payload: bool) -> Value {
    let entry = letter.entry.clone().unwrap_or_default();
    let payload = match (&entry.body, with_payload) {
        (Some(wal_proto::v1::entry::Body::Payload(bytes)), true) => {
            Some(String::from_utf8_lossy(bytes).into_owned())
        }
        _ => None,
    };
    json!({
        "dlq": letter.dlq, "position": letter.position, "id": entry.id, "key": entry.key,
        "class": class_name(entry.last_error_class), "reason": entry.last_error,
        "attempt": entry.attempt, "redrives": entry.redrives,
        "dead_lettered_at_micros": entry.dead_lettered_at_micros,
        "destination": entry.destination, "region": entry.destination_region,
        "trace_id": wal_runtime::trace_context::trace_id(&entry.trace_context),
        "payload": payload,
    })
}

fn redrive_json(r: &Redrive) -> Value {
    json!({
        "id": r.id, "state": r.state, "started_by": r.started_by,
        "started_at_micros": r.started_at_micros, "updated_at_micros": r.updated_at_micros,
        "finished_at_micros": r.finished_at_micros, "rate": r.rate, "found": r.found,
        "read": r.read, "redriven": r.redriven, "left": r.left, "error": r.error,
        // A replay (walctl replay) shares the redrive's record: its range, when it is one.
        "replay": r.replay.as_ref().map(|range| json!({
            "from_micros": range.from_micros, "to_micros": range.to_micros,
            "excluded": range.excluded, "excluded_not_read": range.excluded_not_read,
        })),
    })
}
