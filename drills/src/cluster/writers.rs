//! The cluster drills' writers: clients that retry a write on the other producer until it is
//! answered or their deadline passes, as a service team's client would.

use super::*;

/// What the writers saw beyond each write's final answer.
#[derive(Debug, Default)]
pub struct Attempts {
    /// Writes whose first attempt was not answered TRUE: the outage a client without retries sees.
    pub(super) first_not_true: AtomicUsize,
    /// Attempts in all.
    pub(super) made: AtomicUsize,
}

impl Attempts {
    /// Writes whose first attempt was not answered TRUE.
    pub fn first_not_true(&self) -> usize {
        self.first_not_true.load(Ordering::Relaxed)
    }
}

/// One write as a client following the retry rules makes it: the first attempt on producer
/// `first`, each retry on the next producer with the same id, with a growing pause, until an
/// attempt answers TRUE or [`CLIENT_DEADLINE`] passes. Its recorded answer: TRUE if an attempt
/// was; else UNKNOWN if any attempt may have stored it (UNKNOWN, or no answer); else the last.
/// Returns that answer.
pub async fn write_retrying(
    channels: &[RwLock<Channel>],
    first: usize,
    namespace: &str,
    id: String,
    payload: Vec<u8>,
    answers: &Answers,
    attempts: &Attempts,
) -> Answer {
    let started = Instant::now();
    let scratch = Answers::default();
    let mut maybe_stored = false;
    let mut last = Answer::Refused;
    for attempt in 0.. {
        let channel = channels[(first + attempt) % channels.len()]
            .read()
            .unwrap()
            .clone();
        attempts.made.fetch_add(1, Ordering::Relaxed);
        last = send(channel, namespace, id.clone(), payload.clone(), &scratch).await;
        if attempt == 0 && last != Answer::True {
            attempts.first_not_true.fetch_add(1, Ordering::Relaxed);
        }
        // Refused covers no answer within the call's limit, which may have stored it; a
        // connection refused by a killed producer stored nothing, but is not told apart: such a
        // write ending FALSE is counted UNKNOWN, never checked as FALSE (the safe side).
        maybe_stored |= matches!(last, Answer::Unknown | Answer::Refused);
        if last == Answer::True || started.elapsed() >= CLIENT_DEADLINE {
            break;
        }
        let pause = 50 * (1 << attempt.min(5)) + rand::rng().random_range(0..50);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    for (answer, message, n) in scratch.top_reasons(usize::MAX) {
        for _ in 0..n {
            answers.reason(answer, &message);
        }
    }
    let answer = match last {
        Answer::True => Answer::True,
        _ if maybe_stored => Answer::Unknown,
        other => other,
    };
    answers.record(id, answer, started.elapsed());
    answer
}

/// Writers sending unique ids round robin over the producers, retrying as a client that follows
/// the retry rules; each TRUE write's answer time is kept.
pub struct Writers {
    answers: Arc<Answers>,
    attempts: Arc<Attempts>,
    answered: Arc<Mutex<Vec<(String, SystemTime)>>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    pub fn start(
        channels: &Arc<Vec<RwLock<Channel>>>,
        namespace: &str,
        (writers, prefix): (usize, &str),
        payload: Payload,
    ) -> Self {
        let answers = Arc::new(Answers::default());
        let attempts = Arc::new(Attempts::default());
        let answered = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let channels = Arc::clone(channels);
                let (answers, attempts, answered) = (
                    Arc::clone(&answers),
                    Arc::clone(&attempts),
                    Arc::clone(&answered),
                );
                let (stop, namespace, prefix) =
                    (stop.clone(), namespace.to_owned(), prefix.to_owned());
                tokio::spawn(async move {
                    let mut n = 0usize;
                    while !stop.is_cancelled() {
                        let id = format!("{prefix}-w{w}-{n}");
                        let first = (w + n) % channels.len();
                        n += 1;
                        let answer = write_retrying(
                            &channels,
                            first,
                            &namespace,
                            id.clone(),
                            payload(&id),
                            &answers,
                            &attempts,
                        )
                        .await;
                        if answer == Answer::True {
                            answered.lock().unwrap().push((id, SystemTime::now()));
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
            })
            .collect();
        Self {
            answers,
            attempts,
            answered,
            stop,
            tasks,
        }
    }

    /// How many writes were answered so far.
    pub fn answered(&self) -> usize {
        self.answers.len()
    }

    /// Stops the writers once their writes in progress are answered: every write's answer, the
    /// TRUE ones' answer times, and the attempts.
    pub async fn stop(self) -> (Arc<Answers>, Vec<(String, SystemTime)>, Arc<Attempts>) {
        self.stop.cancel();
        for task in self.tasks {
            task.await.unwrap();
        }
        let answered = std::mem::take(&mut *self.answered.lock().unwrap());
        (self.answers, answered, self.attempts)
    }
}
