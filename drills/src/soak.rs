//! The soak's sampler: the resident memory, open file descriptors and threads of each platform
//! process, every interval, printed as it goes; then each one's growth from the sample at
//! [`SETTLED`] (start-up and first connections done) to the end of the run. A leak shows as
//! steady growth; the goal is under 10%.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wal_testkit::measure::Footprint;

/// From when a process's footprint counts as settled.
pub const SETTLED: Duration = Duration::from_secs(300);
/// The most growth past [`SETTLED`] a soak accepts.
const GROWTH_GOAL: f64 = 0.10;
/// Counts of descriptors and threads move by a few as connections and blocking threads come
/// and go; growth within this many is not counted against the goal.
const COUNT_SLACK: usize = 5;

/// One sample: when, and each process's footprint (`None`: gone).
type Sample = (Duration, Vec<Option<Footprint>>);

/// The samples of each process, in the order they were taken, with their time.
pub struct Sampler {
    names: Vec<String>,
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    /// Samples `processes` (a name and a pid each) now and every `every`.
    pub fn start(processes: Vec<(String, u32)>, every: Duration) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let names = processes.iter().map(|(name, _)| name.clone()).collect();
        let task = tokio::spawn({
            let (samples, stop) = (Arc::clone(&samples), stop.clone());
            async move {
                let started = Instant::now();
                loop {
                    let taken: Vec<Option<Footprint>> = processes
                        .iter()
                        .map(|(_, pid)| Footprint::of(*pid))
                        .collect();
                    let line = processes
                        .iter()
                        .zip(&taken)
                        .map(|((name, _), f)| match f {
                            Some(f) => format!(
                                "{name} {:.1} MiB {} fds {} threads",
                                f.rss_bytes as f64 / 1_048_576.0,
                                f.fds,
                                f.threads
                            ),
                            None => format!("{name} gone"),
                        })
                        .collect::<Vec<_>>()
                        .join("; ");
                    println!("  at {:.0} s: {line}", started.elapsed().as_secs_f64());
                    samples.lock().unwrap().push((started.elapsed(), taken));
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(every) => {}
                    }
                }
            }
        });
        Self {
            names,
            samples,
            stop,
            task,
        }
    }

    /// Stops sampling; returns each process's growth past [`SETTLED`] as text, and what broke
    /// the goal (or that the run was too short to tell).
    pub async fn finish(self) -> (String, Vec<String>) {
        self.stop.cancel();
        let _ = self.task.await;
        let samples = self.samples.lock().unwrap();
        let Some(settled) = samples.iter().position(|(at, _)| *at >= SETTLED) else {
            return (
                String::new(),
                vec![format!(
                    "the soak ended before {} s: no growth to measure",
                    SETTLED.as_secs()
                )],
            );
        };
        let (from, to) = (&samples[settled].1, &samples[samples.len() - 1].1);
        let mut growth = Vec::new();
        let mut broken = Vec::new();
        for (i, name) in self.names.iter().enumerate() {
            let (Some(a), Some(b)) = (from[i], to[i]) else {
                broken.push(format!("{name} exited during the soak"));
                continue;
            };
            let rss = b.rss_bytes as f64 / a.rss_bytes.max(1) as f64 - 1.0;
            growth.push(format!(
                "{name}: RSS {:.1} -> {:.1} MiB ({:+.1}%), fds {} -> {}, threads {} -> {}",
                a.rss_bytes as f64 / 1_048_576.0,
                b.rss_bytes as f64 / 1_048_576.0,
                100.0 * rss,
                a.fds,
                b.fds,
                a.threads,
                b.threads
            ));
            if rss > GROWTH_GOAL {
                broken.push(format!(
                    "{name}'s RSS grew {:.1}% past the goal",
                    100.0 * rss
                ));
            }
            for (what, a, b) in [("fds", a.fds, b.fds), ("threads", a.threads, b.threads)] {
                if b > a + COUNT_SLACK && (b - a) as f64 > GROWTH_GOAL * a as f64 {
                    broken.push(format!("{name}'s {what} grew from {a} to {b}"));
                }
            }
        }
        (growth.join("; "), broken)
    }
}
