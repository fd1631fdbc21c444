//! How walctl fails: a message for the operator and an exit code for scripts.

use tonic::Code;

/// walctl's exit codes; scripts rely on them, so they never change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// The control plane, the producer or a broker failed or could not be reached, or the
    /// producer shed the write: retrying may help. Also a replay that left entries unapplied.
    Failed = 1,
    /// Bad arguments or a bad file: fix the command.
    Usage = 2,
    /// Refused by the control plane's rules; the message says which.
    Refused = 3,
    NotFound = 4,
    /// `write`: FALSE, not stored; retry freely.
    NotStored = 5,
    /// `write`: UNKNOWN, may be stored; retry with the same --idempotency-id.
    Unknown = 6,
    /// Not allowed: the caller's principal lacks the grant (PERMISSION_DENIED), or its
    /// certificate maps to no principal (UNAUTHENTICATED).
    Denied = 7,
}

/// A failure, with the exit code that classifies it.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    /// What to tell the operator; empty when the output already said it.
    pub message: String,
}

impl Failure {
    fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self {
            exit,
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    /// What the control plane answered, classified for the exit code.
    pub fn from_status(status: &tonic::Status, doing: &str) -> Self {
        let exit = match status.code() {
            Code::InvalidArgument => Exit::Usage,
            Code::FailedPrecondition | Code::Aborted => Exit::Refused,
            Code::NotFound => Exit::NotFound,
            Code::PermissionDenied | Code::Unauthenticated => Exit::Denied,
            _ => Exit::Failed,
        };
        // A transport error (a refused TLS handshake, say) says why only in its sources.
        let mut message = format!("{doing}: {}", status.message());
        if let Some(source) = std::error::Error::source(status) {
            message.push_str(&format!(": {}", causes(source)));
        }
        Self::new(exit, message)
    }

    /// An outcome the output already described: only the exit code is left to give.
    pub fn quiet(exit: Exit) -> Self {
        Self::new(exit, String::new())
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Exit::NotFound, message)
    }

    /// A broker failed or could not be reached: retrying may help.
    pub fn broker(message: impl Into<String>) -> Self {
        Self::new(Exit::Failed, message)
    }

    pub fn unreachable_producer(address: &str, error: impl std::fmt::Display) -> Self {
        Self::new(
            Exit::Failed,
            format!(
                "cannot reach the producer at {address}: {error}. Is wal-producer running? Set --producer or WAL_PRODUCER to its address"
            ),
        )
    }

    pub fn unreachable(address: &str, error: impl std::fmt::Display) -> Self {
        Self::new(
            Exit::Failed,
            format!(
                "cannot reach the control plane at {address}: {error}. Is wal-control-plane running? Set --control-plane or WAL_CONTROL_PLANE to its address"
            ),
        )
    }
}

/// An error with its causes, `: `-separated: a transport error says why only in its sources.
pub fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
