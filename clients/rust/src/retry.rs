//! The retry loop's state: attempts, backoff with full jitter, the deadline, and what to return
//! when it ends. Callers loop: attempt, then [`Retry::after`] says wait or return.

use std::time::Duration;

use rand::Rng as _;
use tokio::time::Instant;
use tonic::Code;

use crate::answer::Answer;
use crate::settings::Settings;

/// How a retried call ended.
#[derive(Debug)]
pub(crate) enum Ended<T> {
    Done(T),
    /// The deadline ended while the entry may have been stored.
    Unknown(String),
    /// The deadline ended and no attempt stored anything: never sent, or not committed.
    NotStored(String),
    Refused {
        code: Code,
        field: String,
        message: String,
    },
}

/// What comes after an attempt.
#[derive(Debug)]
pub(crate) enum Next<T> {
    Wait(Duration),
    Return(Ended<T>),
}

#[derive(Debug)]
pub(crate) struct Retry {
    deadline: Instant,
    step: Duration,
    max_step: Duration,
    pub attempts: u32,
    /// Whether an attempt may have stored the entry (an UNKNOWN or a lost call).
    maybe_stored: bool,
    /// Whether an attempt was shed (and so, without `maybe_stored`, refused at the deadline).
    shed: bool,
    last: String,
}

impl Retry {
    pub fn new(settings: &Settings, deadline: Instant) -> Self {
        Self {
            deadline,
            step: settings.backoff,
            max_step: settings.max_backoff,
            attempts: 0,
            maybe_stored: false,
            shed: false,
            last: String::new(),
        }
    }

    /// Counts the next attempt and gives the time it has left; `None` once the deadline has
    /// passed (no attempt starts after it).
    pub fn next_attempt(&mut self) -> Option<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        self.attempts += 1;
        Some(left)
    }

    /// After an attempt's answer: return it, or wait and try again.
    pub fn after<T>(&mut self, answer: Answer<T>) -> Next<T> {
        let wait = match answer {
            Answer::Done(done) => return Next::Return(Ended::Done(done)),
            Answer::Refused {
                code,
                field,
                message,
            } => {
                return Next::Return(Ended::Refused {
                    code,
                    field,
                    message,
                });
            }
            Answer::Unknown(message) | Answer::Lost(message) | Answer::TimedOut(message) => {
                self.maybe_stored = true;
                self.last = message;
                full_jitter(self.step)
            }
            Answer::Unsent(message) => {
                self.last = message;
                full_jitter(self.step)
            }
            Answer::Shed {
                retry_after,
                message,
            } => {
                self.shed = true;
                self.last = message;
                // The producer's wait plus up to as much again, so that writes shed together
                // come back spread out.
                retry_after.map_or_else(|| full_jitter(self.step), |wait| wait + full_jitter(wait))
            }
        };
        self.step = (self.step * 2).min(self.max_step);
        if Instant::now() + wait >= self.deadline {
            return Next::Return(self.ended());
        }
        Next::Wait(wait)
    }

    /// What the deadline leaves: UNKNOWN when an attempt may have stored the entry, the refusal
    /// when the producer shed every attempt, otherwise FALSE (nothing was sent).
    pub fn ended<T>(&mut self) -> Ended<T> {
        let last = std::mem::take(&mut self.last);
        if self.maybe_stored {
            Ended::Unknown(format!("the deadline ended; the last attempt: {last}"))
        } else if self.shed {
            Ended::Refused {
                code: Code::ResourceExhausted,
                field: String::new(),
                message: last,
            }
        } else if last.is_empty() {
            Ended::NotStored("the deadline ended before the first attempt".to_owned())
        } else {
            Ended::NotStored(last)
        }
    }
}

/// A uniformly random wait between zero and `step`.
fn full_jitter(step: Duration) -> Duration {
    rand::rng().random_range(Duration::ZERO..=step)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings::new(["127.0.0.1:1"])
    }

    #[tokio::test]
    async fn waits_stay_within_the_doubling_step_and_the_deadline_ends_unknown() {
        let mut retry = Retry::new(&settings(), Instant::now() + Duration::from_secs(60));
        let mut step = Duration::from_millis(50);
        for _ in 0..8 {
            retry.next_attempt();
            match retry.after::<()>(Answer::Unknown("u".into())) {
                Next::Wait(wait) => assert!(wait <= step, "{wait:?} over {step:?}"),
                Next::Return(ended) => panic!("returned early: {ended:?}"),
            }
            step = (step * 2).min(Duration::from_secs(2));
        }
        let mut late = Retry::new(&settings(), Instant::now() + Duration::from_millis(1));
        late.next_attempt();
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert!(matches!(
            late.after::<()>(Answer::Lost("l".into())),
            Next::Return(Ended::Unknown(_))
        ));
        assert_eq!(
            late.next_attempt(),
            None,
            "no attempt starts after the deadline"
        );
    }

    #[tokio::test]
    async fn shed_waits_the_producers_wait_and_ends_refused_when_nothing_was_stored() {
        let mut retry = Retry::new(&settings(), Instant::now() + Duration::from_millis(300));
        retry.next_attempt();
        let wait = Duration::from_millis(100);
        match retry.after::<()>(Answer::Shed {
            retry_after: Some(wait),
            message: "shed".into(),
        }) {
            Next::Wait(got) => assert!(got >= wait && got <= wait * 2, "{got:?}"),
            Next::Return(ended) => panic!("{ended:?}"),
        }
        assert!(matches!(
            retry.ended::<()>(),
            Ended::Refused {
                code: Code::ResourceExhausted,
                ..
            }
        ));
        let mut refused = Retry::new(&settings(), Instant::now() + Duration::from_secs(1));
        refused.next_attempt();
        assert!(matches!(
            refused.after::<()>(Answer::Refused {
                code: Code::NotFound,
                field: "namespace".into(),
                message: "no".into()
            }),
            Next::Return(Ended::Refused {
                code: Code::NotFound,
                ..
            })
        ));
    }
}
