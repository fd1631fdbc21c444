//! Which Kafka offset may be committed while entries are still in progress.
//!
//! Kafka keeps one committed offset per partition: everything below it counts as done. With many
//! entries in flight and acknowledged out of order, the offset may only advance to the oldest
//! entry still in progress, never past it; otherwise a crash would lose that entry.

use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Default)]
pub(crate) struct OffsetTracker {
    partitions: HashMap<i32, PartitionTrack>,
}

#[derive(Debug, Default)]
struct PartitionTrack {
    in_progress: BTreeSet<i64>,
    /// One past the highest offset received: the commit point once nothing is in progress.
    next: i64,
    /// The last commit point the client took to store (see [`OffsetTracker::stored`]).
    stored: i64,
}

impl PartitionTrack {
    fn commit_point(&self) -> i64 {
        self.in_progress.first().copied().unwrap_or(self.next)
    }
}

impl OffsetTracker {
    /// Starts tracking a partition assigned to this consumer.
    pub(crate) fn assign(&mut self, partition: i32) {
        self.partitions.entry(partition).or_default();
    }

    /// Records an entry handed out by `receive`. Returns false, recording nothing, when the
    /// partition is not assigned here (it was revoked after the message was fetched): the entry
    /// must not be handed out, its new owner reads it.
    #[cfg(test)]
    pub(crate) fn received(&mut self, partition: i32, offset: i64) -> bool {
        self.received_after(partition, offset).is_some()
    }

    /// As [`received`](Self::received); `Some(Some(skipped))` when offsets were skipped since
    /// the last entry received on the partition. The platform's topics have no transactions and
    /// no compaction, so their offsets are contiguous: a skip is entries this reader will never
    /// see (retention removed them and the consumer reset past them).
    pub(crate) fn received_after(
        &mut self,
        partition: i32,
        offset: i64,
    ) -> Option<Option<std::ops::Range<i64>>> {
        let track = self.partitions.get_mut(&partition)?;
        let skipped = (track.next > 0 && offset > track.next).then_some(track.next..offset);
        track.in_progress.insert(offset);
        track.next = track.next.max(offset + 1);
        Some(skipped)
    }

    /// Records an acknowledgement and returns the partition's commit point (the next offset a
    /// restarted consumer reads) when it is past the last one [`stored`](Self::stored): `None`
    /// when the partition was revoked in a rebalance since, or when the point has not moved
    /// (an older entry is still in progress). With entries acknowledged out of order, that
    /// saves a store for most of them. An acknowledgement tried again after a failed store gets
    /// the point again, its entry being no longer in progress.
    pub(crate) fn acknowledged(&mut self, partition: i32, offset: i64) -> Option<i64> {
        let track = self.partitions.get_mut(&partition)?;
        track.in_progress.remove(&offset);
        let point = track.commit_point();
        (point > track.stored).then_some(point)
    }

    /// Records that the client holds `point` as the partition's offset to commit.
    pub(crate) fn stored(&mut self, partition: i32, point: i64) {
        if let Some(track) = self.partitions.get_mut(&partition) {
            track.stored = track.stored.max(point);
        }
    }

    /// Forgets a partition this consumer no longer owns; its in-progress entries will be read
    /// again by the partition's new owner from the last commit point.
    pub(crate) fn revoke(&mut self, partition: i32) {
        self.partitions.remove(&partition);
    }

    #[cfg(test)]
    fn commit_points(&self) -> Vec<(i32, i64)> {
        let mut points: Vec<_> = self
            .partitions
            .iter()
            .map(|(partition, track)| (*partition, track.commit_point()))
            .collect();
        points.sort_unstable();
        points
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn commit_waits_for_the_oldest_entry_in_progress() {
        let mut tracker = OffsetTracker::default();
        tracker.assign(0);
        for offset in 10..15 {
            tracker.received(0, offset);
        }
        assert_eq!(ack(&mut tracker, 0, 12), Some(10));
        assert_eq!(
            ack(&mut tracker, 0, 11),
            None,
            "10 is still in progress: the point stays at 10, stored already"
        );
        assert_eq!(ack(&mut tracker, 0, 10), Some(13));
        assert_eq!(
            ack(&mut tracker, 0, 10),
            None,
            "a second ack changes nothing"
        );
        assert_eq!(ack(&mut tracker, 0, 14), None, "13 is still in progress");
        assert_eq!(ack(&mut tracker, 0, 13), Some(15));
        assert_eq!(tracker.commit_points(), vec![(0, 15)]);
    }

    /// An acknowledgement as the queue makes it: the point handed out is stored.
    fn ack(tracker: &mut OffsetTracker, partition: i32, offset: i64) -> Option<i64> {
        let point = tracker.acknowledged(partition, offset);
        if let Some(point) = point {
            tracker.stored(partition, point);
        }
        point
    }

    #[test]
    fn a_point_whose_store_failed_is_handed_out_again() {
        let mut tracker = OffsetTracker::default();
        tracker.assign(0);
        tracker.received(0, 5);
        assert_eq!(tracker.acknowledged(0, 5), Some(6), "the store then fails");
        assert_eq!(
            tracker.acknowledged(0, 5),
            Some(6),
            "the acknowledgement tried again stores it"
        );
        tracker.stored(0, 6);
        assert_eq!(tracker.acknowledged(0, 5), None);
    }

    #[test]
    fn skipped_offsets_are_a_gap_and_going_back_is_not() {
        let mut tracker = OffsetTracker::default();
        tracker.assign(0);
        assert_eq!(
            tracker.received_after(0, 5),
            Some(None),
            "the first entry after assignment"
        );
        assert_eq!(tracker.received_after(0, 6), Some(None));
        assert_eq!(tracker.received_after(0, 9), Some(Some(7..9)));
        assert_eq!(
            tracker.received_after(0, 8),
            Some(None),
            "a re-read is not a gap"
        );
        assert_eq!(tracker.received_after(1, 0), None, "not assigned");
    }

    #[test]
    fn a_revoked_partition_ignores_late_acks_and_late_messages() {
        let mut tracker = OffsetTracker::default();
        tracker.assign(3);
        assert!(tracker.received(3, 7));
        tracker.revoke(3);
        assert_eq!(tracker.acknowledged(3, 7), None);
        // A message fetched before the revocation but handed over after it is not taken in,
        // so a later re-assignment cannot start from a commit point past unread entries.
        assert!(!tracker.received(3, 9));
        assert!(tracker.commit_points().is_empty());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Receive(i32),
        Ack(usize),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        proptest::collection::vec(
            prop_oneof![
                (0..3i32).prop_map(Op::Receive),
                any::<usize>().prop_map(Op::Ack)
            ],
            0..200,
        )
    }

    proptest! {
        /// Against a model that keeps every received offset: the commit point is always the
        /// oldest unacknowledged offset of the partition, or one past the newest received.
        #[test]
        fn commit_point_never_passes_an_entry_in_progress(ops in ops()) {
            let mut tracker = OffsetTracker::default();
            (0..3).for_each(|p| tracker.assign(p));
            let mut next_offset: HashMap<i32, i64> = HashMap::new();
            let mut unacked: Vec<(i32, i64)> = Vec::new();
            // The last point handed out per partition: what the store holds.
            let mut stored: HashMap<i32, i64> = HashMap::new();
            for op in ops {
                match op {
                    Op::Receive(partition) => {
                        let offset = next_offset.entry(partition).or_insert(0);
                        tracker.received(partition, *offset);
                        unacked.push((partition, *offset));
                        *offset += 1;
                    }
                    Op::Ack(pick) if !unacked.is_empty() => {
                        let (partition, offset) = unacked.swap_remove(pick % unacked.len());
                        let point = ack(&mut tracker, partition, offset);
                        let oldest = unacked
                            .iter()
                            .filter(|(p, _)| *p == partition)
                            .map(|(_, o)| *o)
                            .min();
                        let expected = oldest.unwrap_or(next_offset[&partition]);
                        let before = stored.get(&partition).copied().unwrap_or(0);
                        // Handed out exactly when it moved, so the store always holds it.
                        prop_assert_eq!(point, (expected != before).then_some(expected));
                        stored.insert(partition, expected);
                    }
                    Op::Ack(_) => {}
                }
            }
            for (partition, point) in tracker.commit_points() {
                for (p, o) in &unacked {
                    prop_assert!(*p != partition || *o >= point);
                }
            }
        }
    }
}
