//! The error a failure was born of, kept beside the failure's own words.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// The error a failure was born of (the driver's, the client's), kept beside the failure's
/// reason for whoever needs more than words: a test or a caller that downcasts to the driver's
/// error, a log that walks its sources. The failures that keep one say its words in their own
/// message already, so, as `std::io::Error` does, their `source()` is the cause's source.
#[derive(Debug, Clone)]
pub struct Cause(Arc<dyn Error + Send + Sync>);

impl Cause {
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }

    /// The error itself, to downcast.
    pub fn get(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Error for Cause {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}
