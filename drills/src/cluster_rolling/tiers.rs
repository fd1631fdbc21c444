//! The rolling drill's fleet: every tier's processes, each restarted in turn with SIGTERM.

use super::*;

/// The platform's processes, following one control plane.
pub(super) struct Tiers {
    pub(super) builds: Builds,
    /// The control plane's store, address and process.
    pub(super) store: PathBuf,
    pub(super) control_listen: std::net::SocketAddr,
    pub(super) control_plane: KilledWhenDropped,
    /// An empty folder: the producers and consumers take their namespaces from the control
    /// plane, but start with a folder named.
    pub(super) folder: PathBuf,
    pub(super) producers: Vec<ProducerProcess>,
    pub(super) channels: Arc<Vec<RwLock<Channel>>>,
    pub(super) consumers: Vec<KilledWhenDropped>,
    /// What the stops took, and the stops that needed SIGKILL.
    pub(super) stops: Vec<String>,
    pub(super) killed: usize,
}

impl Tiers {
    pub(super) async fn start(builds: Builds) -> Self {
        let store = std::env::temp_dir().join(format!("{}.db", unique("rolling-registry")));
        let control_listen = refusing_address();
        let control_plane = start_control_plane(
            &builds.binary("wal-control-plane", true),
            &store,
            control_listen,
        )
        .await;
        let folder = std::env::temp_dir().join(unique("rolling-empty"));
        std::fs::create_dir_all(&folder).unwrap();
        Self {
            builds,
            store,
            control_listen,
            control_plane,
            folder,
            producers: Vec::new(),
            channels: Arc::new(Vec::new()),
            consumers: Vec::new(),
            stops: Vec::new(),
            killed: 0,
        }
    }

    pub(super) fn follow(&self) -> Vec<(&'static str, String)> {
        vec![(
            "WAL_CONTROL_PLANE",
            format!("http://{}", self.control_listen),
        )]
    }

    /// The producers and consumers, on the first build, once the namespace is applied.
    pub(super) async fn start_fleet(&mut self) {
        let producer = self.builds.binary("wal-producer", true);
        for _ in 0..PRODUCERS {
            self.producers.push(
                ProducerProcess::start_from(&producer, &self.folder, WRITE_TIMEOUT, &self.follow())
                    .await,
            );
        }
        self.channels = Arc::new(
            self.producers
                .iter()
                .map(|p| RwLock::new(p.channel.clone()))
                .collect(),
        );
        let consumer = self.builds.binary("wal-consumer", true);
        for _ in 0..CONSUMERS {
            self.consumers.push(consumer_process_from(
                &consumer,
                &self.folder,
                &self.follow(),
            ));
        }
    }

    /// Sends `child` SIGTERM and waits for it to exit; kills it past [`STOP_LIMIT`].
    pub(super) async fn stop(&mut self, what: &str, child: KilledWhenDropped) {
        let started = Instant::now();
        terminate(&child);
        let exited = reap_within(child, started).await;
        if !exited {
            self.killed += 1;
        }
        self.stops.push(format!(
            "{what} {:.1} s{}",
            started.elapsed().as_secs_f64(),
            if exited { "" } else { " (killed)" }
        ));
    }

    pub(super) async fn roll_control_plane(&mut self) {
        let old = std::mem::replace(&mut self.control_plane, KilledWhenDropped(placeholder()));
        self.stop("control plane", old).await;
        self.control_plane = start_control_plane(
            &self.builds.binary("wal-control-plane", false),
            &self.store,
            self.control_listen,
        )
        .await;
    }

    pub(super) async fn roll_producer(&mut self, i: usize) {
        let producer = self.builds.binary("wal-producer", false);
        // The writers stop choosing it first: a client's balancer drops an address whose
        // connection fails, and the retry goes to the other.
        let child = std::mem::replace(&mut self.producers[i].child, placeholder());
        self.stop(&format!("producer {i}"), KilledWhenDropped(child))
            .await;
        self.producers[i] =
            ProducerProcess::start_from(&producer, &self.folder, WRITE_TIMEOUT, &self.follow())
                .await;
        *self.channels[i].write().unwrap() = self.producers[i].channel.clone();
    }

    pub(super) async fn roll_consumer(&mut self, i: usize, groups: &[String]) {
        let consumer = self.builds.binary("wal-consumer", false);
        let child = std::mem::replace(&mut self.consumers[i], KilledWhenDropped(placeholder()));
        self.stop(&format!("consumer {i}"), child).await;
        self.consumers[i] = consumer_process_from(&consumer, &self.folder, &self.follow());
        back("the consumer groups stable with 3 members", || {
            let groups = groups.to_vec();
            async move {
                tokio::task::spawn_blocking(move || {
                    groups
                        .iter()
                        .all(|g| group_state(g) == ("Stable".to_owned(), CONSUMERS))
                })
                .await
                .unwrap()
            }
        })
        .await;
    }
}

/// A drill that panics halfway leaves no process behind on the shared machine (the producers
/// kill themselves when dropped).
impl Drop for Tiers {
    fn drop(&mut self) {
        for child in self.consumers.iter_mut().chain([&mut self.control_plane]) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
