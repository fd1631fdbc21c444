//! What the benchmarks measure with: a process's CPU time and run-queue wait, the machine's
//! busy share, and medians and percentiles.

/// CPU seconds this process has used so far (user + system), from /proc.
pub fn cpu_seconds() -> f64 {
    cpu_seconds_at("/proc/self/stat")
}

/// CPU seconds process `pid` has used so far (user + system); 0 when it is gone.
pub fn cpu_seconds_of(pid: u32) -> f64 {
    cpu_seconds_at(&format!("/proc/{pid}/stat"))
}

/// CPU seconds this process's children have used (user + system), counting only those that
/// have exited and been waited for: the CPU of a program a benchmark ran to completion.
pub fn children_cpu_seconds() -> f64 {
    // cutime and cstime: fields 16 and 17 of stat(5).
    stat_seconds("/proc/self/stat", 13, 14)
}

fn cpu_seconds_at(path: &str) -> f64 {
    // utime and stime: fields 14 and 15 of stat(5).
    stat_seconds(path, 11, 12)
}

/// The sum of two tick fields of a stat(5) file, counted after the command name, in seconds.
fn stat_seconds(path: &str, first: usize, second: usize) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at its closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(first) + ticks(second)) / 100.0
}

/// How long the threads of a process have waited on a run queue, ready to run but given no CPU
/// (the second field of /proc/PID/task/TID/schedstat), thread by thread: take one with
/// [`RunQueueWait::of`] and ask [`RunQueueWait::since`] at the end of a window. A thread that
/// exits within the window takes its wait with it, so the figure is a lower bound when threads
/// come and go (tokio's blocking threads); a runtime's workers stay.
#[derive(Debug, Clone)]
pub struct RunQueueWait {
    pid: u32,
    nanos: std::collections::HashMap<String, u64>,
}

impl RunQueueWait {
    /// Process `pid`'s threads' waits so far; none when the process is gone.
    pub fn of(pid: u32) -> Self {
        let nanos = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|task| {
                let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
                let waited = stat.split_whitespace().nth(1)?.parse().ok()?;
                Some((task.file_name().to_string_lossy().into_owned(), waited))
            })
            .collect();
        Self { pid, nanos }
    }

    /// Seconds the process's threads alive now waited since `self` was taken.
    pub fn since(&self) -> f64 {
        let now = Self::of(self.pid);
        let nanos: u64 = now
            .nanos
            .iter()
            .map(|(tid, waited)| waited.saturating_sub(self.nanos.get(tid).copied().unwrap_or(0)))
            .sum();
        nanos as f64 / 1e9
    }
}

/// How busy the whole machine's CPUs have been, as ticks from /proc/stat: take one with
/// [`MachineTicks::now`] and ask [`MachineTicks::busy_since`] at the end of a window. Brokers
/// and databases on the machine count too: this is the contention every side ran under.
#[derive(Debug, Clone, Copy)]
pub struct MachineTicks {
    busy: f64,
    total: f64,
}

impl MachineTicks {
    pub fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let line = stat.lines().next().unwrap_or_default();
        let ticks: Vec<f64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        let total: f64 = ticks.iter().sum();
        // idle and iowait are the 4th and 5th numbers.
        let idle = ticks.get(3).copied().unwrap_or(0.0) + ticks.get(4).copied().unwrap_or(0.0);
        Self {
            busy: total - idle,
            total,
        }
    }

    /// The busy share of the machine's CPU time since `self` (0 to 1).
    pub fn busy_since(self) -> f64 {
        let now = Self::now();
        (now.busy - self.busy) / (now.total - self.total).max(1.0)
    }
}

/// A thread of the benchmark's own process that sleeps 1 ms at a time while a round runs and
/// records how late each sleep ended: how long the load generator itself could be held up
/// meanwhile. A latency tail far longer than that was not the benchmark failing to send or to
/// read its answers on time. The thread shares the machine's CPUs with everything else, so
/// this is no proof of where a tail came from; it rules one place out.
#[derive(Debug)]
pub struct StallWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Stalls>>,
}

/// What a [`StallWatch`] saw: the latest wake-up, and the CPU its own thread used, for a side
/// charged with this process's CPU to leave out.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stalls {
    pub longest: std::time::Duration,
    pub cpu_seconds: f64,
}

impl StallWatch {
    pub fn start() -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let tick = std::time::Duration::from_millis(1);
            let mut longest = std::time::Duration::ZERO;
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let asleep = std::time::Instant::now();
                std::thread::sleep(tick);
                longest = longest.max(asleep.elapsed().saturating_sub(tick));
            }
            // This thread's time on a CPU (the first field of its schedstat), in ns.
            let on_cpu = std::fs::read_to_string("/proc/thread-self/schedstat")
                .ok()
                .and_then(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0);
            Stalls {
                longest,
                cpu_seconds: on_cpu as f64 / 1e9,
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the thread and returns what it saw since [`start`](Self::start).
    pub fn stop(mut self) -> Stalls {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for StallWatch {
    /// A round that panicked or was dropped does not leave the thread waking 1,000 times a second.
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The value at fraction `p` (0 to 1) of `values` once sorted; NaN for none.
pub fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let at = ((values.len().saturating_sub(1)) as f64 * p).round() as usize;
    values.get(at).copied().unwrap_or(f64::NAN)
}

/// The middle value of `values` (the upper one of an even count).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// How long a probe waiting for something to become visible waits before it looks again,
/// `waited` after it started: 1 ms at first, then a tenth of the time waited so far. A reading
/// stays within about 10%, and late entries are not polled every millisecond (which made the
/// probes themselves the load once lag grew).
pub fn poll_after(waited: std::time::Duration) -> std::time::Duration {
    (waited / 10).max(std::time::Duration::from_millis(1))
}

/// The peak resident memory (VmHWM) of process `pid` so far, in bytes; `None` where /proc cannot
/// tell (the process is gone, or this is not Linux), never a 0 that a memory bound would pass.
pub fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// What a process holds at one moment: resident memory, open file descriptors and threads,
/// from /proc; `None` where /proc cannot tell (the process is gone, or this is not Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    pub rss_bytes: u64,
    pub fds: usize,
    pub threads: usize,
}

impl Footprint {
    pub fn of(pid: u32) -> Option<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        };
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
        Some(Self {
            rss_bytes: field("VmRSS:")? * 1024,
            fds,
            threads: usize::try_from(field("Threads:")?).ok()?,
        })
    }
}

/// One side of a benchmark round: entries per second, and the CPU its process spent per entry
/// (µs). Shown as `12345/s, 12.3 µs CPU/entry`.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    pub per_second: f64,
    pub cpu_micros: f64,
}

impl Rate {
    /// `entries` done since `started`, the process having used `cpu_before` CPU seconds
    /// ([`cpu_seconds`]) at the start.
    pub fn since(entries: usize, started: std::time::Instant, cpu_before: f64) -> Self {
        Self::over(entries, started.elapsed(), cpu_seconds() - cpu_before)
    }

    /// `entries` done in `elapsed`, using `cpu` CPU seconds.
    pub fn over(entries: usize, elapsed: std::time::Duration, cpu: f64) -> Self {
        Self {
            per_second: entries as f64 / elapsed.as_secs_f64(),
            cpu_micros: cpu * 1e6 / entries as f64,
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>7.0}/s, {:>5.1} µs CPU/entry",
            self.per_second, self.cpu_micros
        )
    }
}

/// Which side of a benchmark a profile records (`BENCH_PERF_SIDE`: `platform`, the default,
/// `baseline`, or `archived`: apply_to_cql's consumer of a namespace keeping an archive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Platform,
    Baseline,
    Archived,
}

/// A measured window of one side: a `perf record --control fifo:PATH` started with events
/// disabled (`-D -1`) samples from [`profile`] until this is dropped, when `BENCH_PERF_CONTROL`
/// names that fifo and the side is the one `BENCH_PERF_SIDE` asks for; otherwise nothing
/// happens. So a profile holds that side's work alone, not the queue filling or the other side
/// (see `scripts/profile-bench`).
#[derive(Debug)]
#[must_use = "the window closes when this is dropped"]
pub struct PerfWindow(Side);

/// Opens `side`'s measured window; see [`PerfWindow`].
pub fn profile(side: Side) -> PerfWindow {
    perf_control(side, "enable");
    PerfWindow(side)
}

impl Drop for PerfWindow {
    fn drop(&mut self) {
        perf_control(self.0, "disable");
    }
}

/// Tells perf's control fifo to `enable` or `disable` sampling, for `side`'s window.
fn perf_control(side: Side, command: &str) {
    use std::io::Write as _;
    use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};

    let Ok(fifo) = std::env::var("BENCH_PERF_CONTROL") else {
        return;
    };
    let wanted = match std::env::var("BENCH_PERF_SIDE").as_deref() {
        Ok("baseline") => Side::Baseline,
        Ok("archived") => Side::Archived,
        Ok("platform") | Err(_) => Side::Platform,
        Ok(other) => {
            eprintln!("BENCH_PERF_SIDE is '{other}'; expected platform, baseline or archived");
            return;
        }
    };
    if side != wanted {
        return;
    }
    if !std::fs::metadata(&fifo).is_ok_and(|m| m.file_type().is_fifo()) {
        eprintln!("BENCH_PERF_CONTROL: {fifo} is not a fifo; expected perf's control fifo");
        return;
    }
    // Non-blocking: with no perf reading the fifo, the open fails (ENXIO) instead of waiting
    // for good.
    let written = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .and_then(|mut f| f.write_all(format!("{command}\n").as_bytes()));
    if let Err(error) = written {
        eprintln!("BENCH_PERF_CONTROL: cannot tell {fifo} to {command}: {error}");
    }
}
