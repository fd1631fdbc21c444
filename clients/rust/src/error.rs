//! What a client call fails with besides an outcome.

use tonic::Code;

/// A call's failure: a refusal (nothing stored, never retried), or settings the client cannot
/// use.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("refused with {code:?}{}: {message}", if field.is_empty() { String::new() } else { format!(" (field {field})") })]
    Refused {
        code: Code,
        /// The request field the refusal is about (`namespace`, `payload`,
        /// `lifecycle.delay_millis`...); empty when the producer named none.
        field: String,
        message: String,
        /// The attempts made, the refused one included.
        attempts: u32,
    },
    /// A call that must be answered to mean anything (an abort) got no answer by its deadline.
    #[error("no answer by the deadline after {attempts} attempts: {message}")]
    Unanswered { message: String, attempts: u32 },
    #[error("client settings: {0}")]
    Settings(String),
}

impl Error {
    /// The refusal's code, if it is one.
    pub fn code(&self) -> Option<Code> {
        match self {
            Self::Refused { code, .. } => Some(*code),
            Self::Unanswered { .. } | Self::Settings(_) => None,
        }
    }
}
