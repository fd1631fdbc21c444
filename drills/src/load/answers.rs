//! What each write of a drill was answered, recorded by id.

use super::*;

/// What a write was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    True,
    False,
    Unknown,
    /// RESOURCE_EXHAUSTED: the namespace was over its limits; nothing was stored.
    Shed,
    /// Another error, or no answer within [`CALL_TIMEOUT`].
    Refused,
}

/// Each write's answer by its id, and the latency of every answered call.
#[derive(Debug, Default)]
pub struct Answers {
    by_id: Mutex<HashMap<String, Answer>>,
    latencies_ms: Mutex<Vec<f64>>,
    /// Why writes were not answered TRUE: the answer and its message, counted.
    reasons: Mutex<HashMap<(Answer, String), usize>>,
}

impl Answers {
    pub fn record(&self, id: String, answer: Answer, took: Duration) {
        self.by_id.lock().unwrap().insert(id, answer);
        if answer != Answer::Refused {
            self.latencies_ms
                .lock()
                .unwrap()
                .push(took.as_secs_f64() * 1e3);
        }
    }

    pub fn reason(&self, answer: Answer, message: &str) {
        // Digits vary from write to write (ids, counts); without them alike reasons add up.
        let message: String = message
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .take(160)
            .collect();
        *self
            .reasons
            .lock()
            .unwrap()
            .entry((answer, message))
            .or_default() += 1;
    }

    /// The most frequent reasons writes were not answered TRUE, most frequent first.
    pub fn top_reasons(&self, most: usize) -> Vec<(Answer, String, usize)> {
        let mut reasons: Vec<_> = self
            .reasons
            .lock()
            .unwrap()
            .iter()
            .map(|((answer, message), n)| (*answer, message.clone(), *n))
            .collect();
        reasons.sort_by_key(|r| std::cmp::Reverse(r.2));
        reasons.truncate(most);
        reasons
    }

    /// Makes `call` (WriteToLog, or a call answering as it does), giving up after
    /// [`CALL_TIMEOUT`], and records its answer under `id`.
    pub async fn call(
        &self,
        id: String,
        call: impl Future<Output = Result<tonic::Response<WriteToLogResponse>, tonic::Status>>,
    ) -> Answer {
        let started = Instant::now();
        let (answer, message) = match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(response)) => {
                let response = response.into_inner();
                let answer = match response.durable() {
                    Trilean::True => Answer::True,
                    Trilean::False => Answer::False,
                    _ => Answer::Unknown,
                };
                (answer, response.message)
            }
            Ok(Err(status)) if status.code() == tonic::Code::ResourceExhausted => {
                (Answer::Shed, status.message().to_owned())
            }
            Ok(Err(status)) => (
                Answer::Refused,
                format!("{}: {}", status.code(), status.message()),
            ),
            Err(_) => (
                Answer::Refused,
                format!("no answer within {CALL_TIMEOUT:?}"),
            ),
        };
        if answer != Answer::True {
            self.reason(answer, &message);
        }
        self.record(id, answer, started.elapsed());
        answer
    }

    pub fn with(&self, answer: Answer) -> Vec<String> {
        let by_id = self.by_id.lock().unwrap();
        by_id
            .iter()
            .filter(|(_, a)| **a == answer)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// How many writes got each answer, by the table's column names.
    pub fn tally(&self) -> HashMap<&'static str, usize> {
        [
            ("true", Answer::True),
            ("false", Answer::False),
            ("unknown", Answer::Unknown),
            ("shed", Answer::Shed),
            ("refused", Answer::Refused),
        ]
        .into_iter()
        .map(|(name, answer)| (name, self.count(answer)))
        .collect()
    }

    pub fn ids(&self) -> Vec<String> {
        self.by_id.lock().unwrap().keys().cloned().collect()
    }

    pub fn count(&self, answer: Answer) -> usize {
        self.by_id
            .lock()
            .unwrap()
            .values()
            .filter(|a| **a == answer)
            .count()
    }

    pub fn len(&self) -> usize {
        self.by_id.lock().unwrap().len()
    }

    /// The answers of `all`, together (ids are unique across drills' writers).
    pub fn merged(all: &[&Self]) -> Self {
        let merged = Self::default();
        for answers in all {
            let theirs = answers.by_id.lock().unwrap().clone();
            merged.by_id.lock().unwrap().extend(theirs);
            for ((answer, message), n) in answers.reasons.lock().unwrap().iter() {
                *merged
                    .reasons
                    .lock()
                    .unwrap()
                    .entry((*answer, message.clone()))
                    .or_default() += n;
            }
        }
        merged
    }

    /// The latencies recorded so far, taken out (the next call starts a new sample).
    pub fn take_latencies(&self) -> Vec<f64> {
        std::mem::take(&mut *self.latencies_ms.lock().unwrap())
    }
}
