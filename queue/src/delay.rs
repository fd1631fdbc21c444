//! Where an entry waits for its deliver-at, by backend. Pure arithmetic, so the scheduling rules
//! are tested without a broker (and with tokio's paused clock where time passes).
//!
//! - Near (within the backend's hold limit): the consumer holds the entry in memory and applies
//!   it on the dot.
//! - Far, on SQS: the entry goes back on its queue with DelaySeconds, a step of at most 900 s at
//!   a time, becoming visible a little before it is due ([`SQS_LEAD`]).
//! - Far, on Kafka, which cannot hold a record back: the entry is parked on a delay tier, a topic
//!   whose every record waits the same time (the tier's delay) and so is read in the order it
//!   comes due. When the tier's delay has passed the entry goes to the next tier down, or back to
//!   its queue once it is near. Waiting therefore costs topic space, not consumer memory.

use std::time::Duration;

/// The longest wait the consumer holds in memory on a Kafka queue; anything further is parked.
/// As short as the shortest tier allows: an entry further away than this can take that tier and
/// still come back [`KAFKA_LEAD`] early, and the shorter the hold, the fewer entries a steady
/// stream of delayed ones keeps in memory at once (rate times hold).
pub const KAFKA_HOLD_LIMIT: Duration = KAFKA_TIERS[0].saturating_add(KAFKA_LEAD);
/// How early a parked Kafka entry comes back to its queue: time enough for the two hops it
/// takes (tier to queue, queue to consumer) so the last stretch is held and the entry is on time.
pub const KAFKA_LEAD: Duration = Duration::from_secs(2);
/// The delay tiers' waits. Each is about twelve times the one below, so an entry makes at most a
/// dozen hops per tier and a 30-day delay about 200 hops in all, each one record on a topic.
pub const KAFKA_TIERS: [Duration; 4] = [
    Duration::from_secs(5),
    Duration::from_secs(60),
    Duration::from_secs(15 * 60),
    Duration::from_secs(4 * 3600),
];
/// The longest suffix [`tier_topic`] adds to a topic name; Kafka topics are 249 characters long
/// at most, so a namespace's topic names may be this much shorter.
pub const TIER_SUFFIX_MAX: usize = ".delay-15m".len();

/// The longest wait the consumer holds in memory on an SQS queue; anything further goes back on
/// the queue with a delay.
pub const SQS_HOLD_LIMIT: Duration = Duration::from_secs(5);
/// How early a delayed SQS message becomes visible. SQS counts delays in whole seconds, so the
/// consumer receives the message ahead of time and holds the last stretch itself. One second
/// was not enough margin: on ElasticMQ a long poll sometimes returned a newly visible message
/// over a second late (p99 lateness 174 ms with 1 s, 38 ms with 2 s, in `delay_lateness`).
pub const SQS_LEAD: Duration = Duration::from_secs(2);
/// SQS's longest DelaySeconds: the default step for longer delays.
pub const SQS_MAX_DELAY: Duration = Duration::from_secs(900);

/// The tiers a Kafka queue needs when its entries wait at most `longest_wait`: those that a wait
/// that long can use. None when every wait fits the hold limit.
pub fn kafka_tiers(longest_wait: Duration) -> Vec<Duration> {
    if longest_wait <= KAFKA_HOLD_LIMIT {
        return Vec::new();
    }
    let mut tiers: Vec<Duration> = KAFKA_TIERS
        .into_iter()
        .filter(|tier| *tier + KAFKA_LEAD <= longest_wait)
        .collect();
    if tiers.is_empty() {
        // Every wait past the hold limit must have a tier; the smallest always fits one.
        tiers.push(KAFKA_TIERS[0]);
    }
    tiers
}

/// The tier an entry `remaining` away from its deliver-at waits on: the longest whose wait still
/// leaves it [`KAFKA_LEAD`] before it is due. `None` when the entry is near enough to go straight
/// back to its queue (or no tier fits).
pub fn kafka_tier_for(tiers: &[Duration], remaining: Duration) -> Option<Duration> {
    if remaining <= KAFKA_HOLD_LIMIT {
        return None;
    }
    tiers
        .iter()
        .copied()
        .filter(|tier| *tier + KAFKA_LEAD <= remaining)
        .max()
}

/// The delay tier's topic for `topic`: `<topic>.delay-5s`, `-1m`, `-15m`, `-4h`.
pub fn tier_topic(topic: &str, tier: Duration) -> String {
    let seconds = tier.as_secs();
    let label = if seconds.is_multiple_of(3600) {
        format!("{}h", seconds / 3600)
    } else if seconds.is_multiple_of(60) {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    };
    format!("{topic}.delay-{label}")
}

/// When an entry parked on `tier` at `parked_at_micros` goes on: after the tier's wait, and never
/// later than [`KAFKA_LEAD`] before it is due (a clock that moved between processes must not
/// make it late).
pub fn tier_release_at(parked_at_micros: i64, tier: Duration, deliver_at_micros: i64) -> i64 {
    let after_wait = parked_at_micros.saturating_add(micros(tier));
    let latest = deliver_at_micros.saturating_sub(micros(KAFKA_LEAD));
    after_wait.min(latest)
}

/// The DelaySeconds for an SQS message `remaining` away from its deliver-at: whole seconds,
/// [`SQS_LEAD`] early, at most `step`. Zero when it is near.
pub fn sqs_delay(remaining: Duration, step: Duration) -> Duration {
    let early = remaining.saturating_sub(SQS_LEAD);
    Duration::from_secs(early.min(step).as_secs())
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SECOND: i64 = 1_000_000;

    #[test]
    fn a_queue_gets_the_tiers_its_longest_wait_can_use() {
        assert!(kafka_tiers(Duration::ZERO).is_empty());
        assert!(kafka_tiers(KAFKA_HOLD_LIMIT).is_empty());
        assert_eq!(kafka_tiers(Duration::from_secs(8)), [KAFKA_TIERS[0]]);
        assert_eq!(
            kafka_tiers(Duration::from_secs(62)),
            [KAFKA_TIERS[0], KAFKA_TIERS[1]]
        );
        assert_eq!(kafka_tiers(Duration::from_secs(31 * 86_400)), KAFKA_TIERS);
    }

    #[test]
    fn tier_topics_are_named_by_their_wait_and_fit_the_reserved_suffix() {
        let names: Vec<String> = KAFKA_TIERS.iter().map(|t| tier_topic("q", *t)).collect();
        assert_eq!(
            names,
            ["q.delay-5s", "q.delay-1m", "q.delay-15m", "q.delay-4h"]
        );
        assert!(names.iter().all(|n| n.len() - "q".len() <= TIER_SUFFIX_MAX));
    }

    #[test]
    fn near_entries_go_straight_back_and_far_ones_take_the_longest_tier_that_leaves_the_lead() {
        let tiers = KAFKA_TIERS.to_vec();
        let at = |s: u64| kafka_tier_for(&tiers, Duration::from_secs(s));
        assert_eq!(at(3), None);
        assert_eq!(at(7), None);
        assert_eq!(at(8), Some(Duration::from_secs(5)));
        assert_eq!(at(61), Some(Duration::from_secs(5)));
        assert_eq!(at(62), Some(Duration::from_secs(60)));
        assert_eq!(at(86_400), Some(Duration::from_secs(4 * 3600)));
    }

    #[test]
    fn sqs_delays_are_whole_seconds_a_lead_early_and_at_most_a_step() {
        let step = SQS_MAX_DELAY;
        assert_eq!(sqs_delay(Duration::from_millis(800), step), Duration::ZERO);
        assert_eq!(
            sqs_delay(Duration::from_millis(2_900), step),
            Duration::ZERO
        );
        assert_eq!(sqs_delay(Duration::from_millis(3_900), step).as_secs(), 1);
        assert_eq!(sqs_delay(Duration::from_secs(3_600), step), step);
        assert_eq!(
            sqs_delay(Duration::from_secs(30), Duration::from_secs(4)).as_secs(),
            4
        );
    }

    #[test]
    fn a_tier_never_holds_an_entry_past_its_lead() {
        let release = tier_release_at(0, Duration::from_secs(60), 30 * SECOND);
        assert_eq!(release, 28 * SECOND);
    }

    /// Simulates an entry's whole way on Kafka: parked tier by tier, each hop taking `hop`
    /// (produce and receive), until it is near. It must come back before it is due with time to
    /// spare, and in a bounded number of hops.
    fn kafka_journey(delay: Duration, hop: Duration) -> (Duration, usize) {
        let tiers = KAFKA_TIERS.to_vec();
        let deliver_at = micros(delay);
        let mut now = micros(hop);
        let mut hops = 0;
        loop {
            let remaining = Duration::from_micros(deliver_at.saturating_sub(now).max(0) as u64);
            let Some(tier) = kafka_tier_for(&tiers, remaining) else {
                return (remaining, hops);
            };
            now = tier_release_at(now, tier, deliver_at) + micros(hop);
            hops += 1;
        }
    }

    proptest! {
        #[test]
        fn parked_kafka_entries_come_back_near_and_never_late(
            delay_ms in 0u64..(31 * 86_400_000),
            hop_ms in 0u64..500,
        ) {
            let (remaining, hops) =
                kafka_journey(Duration::from_millis(delay_ms), Duration::from_millis(hop_ms));
            // Back at its queue within the hold limit, and still ahead of its deliver-at unless
            // it was written with less than one hop to go.
            prop_assert!(remaining <= KAFKA_HOLD_LIMIT);
            if delay_ms > KAFKA_HOLD_LIMIT.as_millis() as u64 {
                prop_assert!(remaining >= KAFKA_LEAD - Duration::from_millis(hop_ms));
            }
            prop_assert!(hops <= 12 * KAFKA_TIERS.len() + 31 * 6);
        }

        #[test]
        fn sqs_steps_never_make_a_message_visible_after_it_is_due(
            remaining_ms in 0u64..(31 * 86_400_000),
            step_s in 1u64..=900,
        ) {
            let remaining = Duration::from_millis(remaining_ms);
            let delay = sqs_delay(remaining, Duration::from_secs(step_s));
            prop_assert!(delay <= Duration::from_secs(step_s));
            prop_assert!(delay + SQS_LEAD <= remaining.max(SQS_LEAD));
        }
    }
}
