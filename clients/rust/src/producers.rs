//! The producers a client writes to: round robin, and a producer whose call failed in transport
//! skipped for a pause that doubles while it keeps failing.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::answer::Answer;
use crate::error::Error;
use crate::settings::{Settings, Tls};

#[derive(Debug)]
pub(crate) struct Producers {
    all: Vec<Producer>,
    next: AtomicUsize,
    pause: Duration,
    max_pause: Duration,
}

#[derive(Debug)]
struct Producer {
    channel: Channel,
    health: Mutex<Health>,
}

#[derive(Debug, Default)]
struct Health {
    /// Skipped until then.
    paused_until: Option<Instant>,
    /// The pause after its next failure.
    pause: Duration,
    /// Its pause has ended and one call is trying it: the others still skip it until that call
    /// is answered.
    probing: bool,
}

impl Health {
    /// Whether a call may go to this producer now.
    fn open(&self, now: Instant) -> bool {
        !self.probing && self.paused_until.is_none_or(|until| until <= now)
    }
}

impl Producers {
    /// Channels to every producer, connected on first use.
    pub fn new(settings: &Settings) -> Result<Self, Error> {
        if settings.producers.is_empty() {
            return Err(Error::Settings(
                "no producer address; expected at least one host:port".to_owned(),
            ));
        }
        let tls = settings.tls.as_ref().map(tls_config).transpose()?;
        let all = settings
            .producers
            .iter()
            .map(|address| {
                let scheme = if tls.is_some() { "https" } else { "http" };
                let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))
                    .map_err(|e| {
                        Error::Settings(format!(
                            "producer address '{address}': {e}; expected host:port"
                        ))
                    })?
                    .connect_timeout(Duration::from_secs(2))
                    .tcp_nodelay(true);
                if let Some(tls) = &tls {
                    endpoint = endpoint.tls_config(tls.clone()).map_err(|e| {
                        Error::Settings(format!("TLS for producer '{address}': {e}"))
                    })?;
                }
                Ok(Producer {
                    channel: endpoint.connect_lazy(),
                    health: Mutex::new(Health {
                        paused_until: None,
                        pause: settings.pause,
                        probing: false,
                    }),
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(Self {
            all,
            next: AtomicUsize::new(0),
            pause: settings.pause,
            max_pause: settings.max_pause,
        })
    }

    /// The next producer in the rotation that is not paused, other than `avoid` when there is
    /// another; when all are paused, the one whose pause ends first. A producer whose pause has
    /// ended gets one call (its probe) until that call is answered.
    pub fn pick(&self, avoid: Option<usize>) -> (usize, Channel) {
        let count = self.all.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let open = (0..count)
            .map(|k| (start + k) % count)
            .filter(|i| count == 1 || Some(*i) != avoid)
            .find(|i| {
                let mut health = self.health(*i);
                let open = health.open(now);
                if open && health.paused_until.is_some() {
                    health.probing = true;
                }
                open
            });
        let chosen = open.unwrap_or_else(|| {
            (0..count)
                .min_by_key(|i| self.health(*i).paused_until)
                .unwrap_or(0)
        });
        (chosen, self.all[chosen].channel.clone())
    }

    /// Keeps the rotation's view of producer `i` after a call's answer: a lost call pauses it,
    /// any answer puts it back; a call that ran out of the caller's time says nothing of it.
    pub fn settle<T>(&self, i: usize, answer: &Answer<T>) {
        match answer {
            Answer::Lost(_) => self.failed(i),
            Answer::TimedOut(_) | Answer::Unsent(_) => self.unprobed(i),
            _ => self.answered(i),
        }
    }

    /// A call to producer `i` failed in transport: skip it for its pause, then double the pause.
    /// Calls in flight together fail together: one more failure while it is paused changes
    /// nothing.
    pub fn failed(&self, i: usize) {
        let mut health = self.health(i);
        let now = Instant::now();
        if !health.probing && health.paused_until.is_some_and(|until| until > now) {
            return;
        }
        health.probing = false;
        health.paused_until = Some(now + health.pause);
        health.pause = (health.pause * 2).min(self.max_pause);
    }

    /// Producer `i` answered: back in the rotation.
    pub fn answered(&self, i: usize) {
        let mut health = self.health(i);
        health.probing = false;
        if health.paused_until.is_some() {
            health.paused_until = None;
            health.pause = self.pause;
        }
    }

    /// A probe that told nothing (the caller's time ran out): the next call may probe again.
    fn unprobed(&self, i: usize) {
        self.health(i).probing = false;
    }

    fn health(&self, i: usize) -> std::sync::MutexGuard<'_, Health> {
        self.all[i]
            .health
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn tls_config(tls: &Tls) -> Result<ClientTlsConfig, Error> {
    let read = |path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| Error::Settings(format!("cannot read '{}': {e}", path.display())))
    };
    let mut config = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(&tls.ca)?))
        .identity(Identity::from_pem(read(&tls.certificate)?, read(&tls.key)?));
    if let Some(domain) = &tls.domain {
        config = config.domain_name(domain);
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_robin_skips_a_failed_producer_until_its_pause_ends() {
        let mut settings = Settings::new(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]);
        settings.pause = Duration::from_millis(30);
        let producers = Producers::new(&settings).unwrap();
        let picks: Vec<usize> = (0..3).map(|_| producers.pick(None).0).collect();
        assert_eq!(picks, [0, 1, 2]);
        producers.failed(1);
        let picks: Vec<usize> = (0..4).map(|_| producers.pick(None).0).collect();
        assert!(!picks.contains(&1), "{picks:?}");
        assert_ne!(
            producers.pick(Some(2)).0,
            2,
            "a retry avoids the producer that failed"
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
        let picks: Vec<usize> = (0..3).map(|_| producers.pick(None).0).collect();
        assert!(picks.contains(&1), "tried again after its pause: {picks:?}");
        let picks: Vec<usize> = (0..4).map(|_| producers.pick(None).0).collect();
        assert!(!picks.contains(&1), "one probe until it answers: {picks:?}");
        producers.failed(0);
        producers.failed(0);
        assert!(
            producers.health(0).pause == Duration::from_millis(60),
            "failures while paused do not double the pause again"
        );
        producers.answered(1);
        producers.answered(0);
        let picks: Vec<usize> = (0..3).map(|_| producers.pick(None).0).collect();
        assert!(
            picks.contains(&1),
            "back after its probe was answered: {picks:?}"
        );
        for i in 0..3 {
            producers.failed(i);
        }
        let (chosen, _) = producers.pick(None);
        assert_eq!(chosen, 0, "all paused: the one whose pause ends first");
    }

    #[test]
    fn no_address_is_a_settings_error() {
        let error = Producers::new(&Settings::new(Vec::<String>::new())).unwrap_err();
        assert!(error.to_string().contains("no producer address"), "{error}");
    }
}
