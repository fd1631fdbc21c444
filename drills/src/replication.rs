//! replication: writes to a namespace whose target is two other regions (a `wal-writer` each,
//! applying to a memcached of its own: the stack's memcached2 and memcached3), while the producer,
//! the consumer and one region's writer are killed with -9 at random moments, each restarted at
//! once (the writer on its own address). Every write answered TRUE must end in both regions.

use memcache::exp::AsyncMetaClient;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use wal_namespaces::Backend;
use wal_testkit::{region_caches, unique};

use crate::kills::kills_under_load;
use crate::load::{Applied, start_under_load};
use crate::processes::{Kill, start_writer};
use crate::table::Row;

pub async fn drill(kills_each: usize, writers: usize, seed: u64) -> Row {
    let mut rng = StdRng::seed_from_u64(seed);
    let [_, east_cache, west_cache] = region_caches();
    let (east, east_writer) = start_writer("east", &east_cache);
    let (west, west_writer) = start_writer("west", &west_cache);
    let target = format!(
        r#"{{"kind": "region", "settings": {{"regions": {{"east": {{"writer": "{east}"}}, "west": {{"writer": "{west}"}}}}}}}}"#
    );
    let mut caches = Vec::new();
    for at in [&east_cache, &west_cache] {
        caches.push(AsyncMetaClient::connect(at.as_str()).await.unwrap());
    }
    let applied = Applied::Regions { caches, target };
    // The caches outlive runs: keys of this run only.
    let prefix = unique("replication");
    let (mut processes, load) =
        start_under_load(Backend::Kafka, &applied, Vec::new(), &prefix, writers).await;
    processes.adopt_writer(east_writer);
    processes.adopt_writer(west_writer);
    let kinds = [Kill::Producer, Kill::Consumer, Kill::Writer("east")];
    let (outcome, faults) =
        kills_under_load(processes, load, &applied, &kinds, kills_each, &mut rng).await;
    Row {
        drill: "replication kills",
        backend: Backend::Kafka,
        faults,
        outcome,
        notes: "applied = in both regions' caches".to_owned(),
        broken: Vec::new(),
    }
}
