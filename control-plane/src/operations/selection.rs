//! Which entries a replay takes: those written in the time range, not excluded by id, matching
//! the field filters, each id once (a queue also holds retry, delay and redrive copies of an
//! entry, all with its id). The control plane's replay and `walctl replay --direct` judge
//! alike.

use std::collections::{BTreeMap, HashSet};

use wal_queue::entry::Entry;

/// Why an entry is left out, counted in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Left {
    /// Written before the range's start or at/after its end.
    OutsideRange,
    /// Named among the ids to leave out.
    Excluded,
    /// Another key or origin region than asked for.
    Filtered,
    /// A later copy (retry, delay, redrive) of an entry this replay already took.
    Repeat,
    /// Not an entry this build can read.
    Undecodable,
    /// Due after the replay began (a delay not over yet): the consumer delivers it on time;
    /// applying it now would be early.
    NotDue,
    /// A region reader's heartbeat: the platform's own, no mutation.
    Heartbeat,
}

impl Left {
    pub fn label(self) -> &'static str {
        match self {
            Self::OutsideRange => "written outside the range",
            Self::Excluded => "excluded by id",
            Self::Filtered => "other key or origin region",
            Self::Repeat => "repeated copies (retries, delays, redrives) of an entry taken",
            Self::Undecodable => "undecodable",
            Self::NotDue => "not due yet (the consumer delivers it)",
            Self::Heartbeat => "region readers' heartbeats",
        }
    }
}

/// An entry id as the taken set keeps it: a UUID (as the producer makes them) as its 128 bits,
/// without an allocation; any other id as its text.
#[derive(Debug, PartialEq, Eq, Hash)]
enum TakenId {
    Uuid(u128),
    Text(String),
}

impl TakenId {
    fn of(id: &str) -> Self {
        // Only the canonical spelling: another spelling of the same UUID (upper case, braces,
        // no hyphens) is another id to the rest of the platform. At 36 characters the parser
        // takes only the hyphenated form, so lower case is all that is left to check.
        if id.len() == 36
            && !id.bytes().any(|b| b.is_ascii_uppercase())
            && let Ok(uuid) = uuid::Uuid::try_parse(id)
        {
            return Self::Uuid(uuid.as_u128());
        }
        Self::Text(id.to_owned())
    }
}

#[derive(Debug)]
pub struct Selection {
    pub from_micros: i64,
    pub to_micros: i64,
    /// When the replay began: entries due later are the consumer's.
    pub now_micros: i64,
    pub excluded: foldhash::HashSet<String>,
    pub key: Option<String>,
    pub origin_region: Option<String>,
    /// Ids taken so far: a queue holds several copies of an entry that was retried, parked on a
    /// delay tier or redriven, and the entry is applied once. About 40 bytes an entry (the
    /// producer's ids are UUIDs).
    taken: foldhash::HashSet<TakenId>,
    /// Excluded ids that were seen, so the report can name the ones that were not.
    pub excluded_seen: HashSet<String>,
    pub left: BTreeMap<Left, u64>,
}

impl Selection {
    pub fn new(
        (from_micros, to_micros, now_micros): (i64, i64, i64),
        excluded: HashSet<String>,
        key: Option<String>,
        origin_region: Option<String>,
    ) -> Self {
        Self {
            from_micros,
            to_micros,
            now_micros,
            excluded: excluded.into_iter().collect(),
            key,
            origin_region,
            taken: foldhash::HashSet::default(),
            excluded_seen: HashSet::new(),
            left: BTreeMap::new(),
        }
    }

    /// Whether to apply `entry`; a left-out one is counted.
    pub fn take(&mut self, entry: &Entry) -> bool {
        match self.judge(entry) {
            Some(left) => {
                self.count(left);
                false
            }
            None => true,
        }
    }

    /// Notes what an earlier run of this replay did with `entry` (read again on a resume, below
    /// the checkpoint): a taken id stays taken, so its later copies are not applied.
    pub fn remember(&mut self, entry: &Entry) {
        let _ = self.judge(entry);
    }

    /// Why `entry` is left out, or `None` to take it (it is then taken: its later copies are
    /// repeats). Counts nothing; [`Selection::take`] counts.
    pub fn judge(&mut self, entry: &Entry) -> Option<Left> {
        if entry.heartbeat {
            Some(Left::Heartbeat)
        } else if entry.original_write_time_micros < self.from_micros
            || entry.original_write_time_micros >= self.to_micros
        {
            Some(Left::OutsideRange)
        } else if self.excluded.contains(&entry.id) {
            self.excluded_seen.insert(entry.id.clone());
            Some(Left::Excluded)
        } else if self.key.as_ref().is_some_and(|key| *key != entry.key)
            || self
                .origin_region
                .as_ref()
                .is_some_and(|region| *region != entry.origin_region)
        {
            Some(Left::Filtered)
        } else if entry.deliver_at_micros > self.now_micros {
            Some(Left::NotDue)
        } else if !self.taken.insert(TakenId::of(&entry.id)) {
            Some(Left::Repeat)
        } else {
            None
        }
    }

    pub fn count(&mut self, left: Left) {
        *self.left.entry(left).or_default() += 1;
    }

    /// The excluded ids this replay never saw: a typo, or an entry outside the range.
    pub fn excluded_unseen(&self) -> Vec<&String> {
        let mut unseen: Vec<&String> = self
            .excluded
            .iter()
            .filter(|id| !self.excluded_seen.contains(*id))
            .collect();
        unseen.sort();
        unseen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, key: &str, written: i64) -> Entry {
        Entry {
            id: id.into(),
            key: key.into(),
            original_write_time_micros: written,
            origin_region: "local".into(),
            ..Entry::default()
        }
    }

    #[test]
    fn takes_each_entry_in_range_once_and_counts_the_rest() {
        let excluded: HashSet<String> = ["bad".to_owned(), "never-seen".to_owned()].into();
        let mut selection = Selection::new((100, 200, 1000), excluded, None, None);
        assert!(selection.take(&entry("a", "k", 100)));
        assert!(!selection.take(&entry("a", "k", 100)), "a retry copy");
        assert!(!selection.take(&entry("old", "k", 99)));
        assert!(!selection.take(&entry("late", "k", 200)));
        assert!(!selection.take(&entry("bad", "k", 150)));
        assert!(selection.take(&entry("b", "k", 199)));
        assert_eq!(selection.left[&Left::Repeat], 1);
        assert_eq!(selection.left[&Left::OutsideRange], 2);
        assert_eq!(selection.left[&Left::Excluded], 1);
        assert_eq!(selection.excluded_unseen(), vec!["never-seen"]);
    }

    #[test]
    fn an_entry_not_due_is_left_to_the_consumer_and_a_remembered_one_is_not_taken_again() {
        let mut selection = Selection::new((0, 1000, 500), HashSet::new(), None, None);
        let mut delayed = entry("d", "k", 10);
        delayed.deliver_at_micros = 501;
        assert!(!selection.take(&delayed));
        assert_eq!(selection.left[&Left::NotDue], 1);
        selection.remember(&entry("done-before", "k", 10));
        assert!(
            !selection.take(&entry("done-before", "k", 10)),
            "a copy read after a resume"
        );
        assert_eq!(selection.left[&Left::Repeat], 1);
    }

    #[test]
    fn uuid_ids_are_kept_as_their_bits_and_other_spellings_stay_distinct() {
        let id = "0194f3a2-7c1e-7b3d-9a55-1f2e3d4c5b6a";
        assert!(matches!(TakenId::of(id), TakenId::Uuid(_)));
        assert_eq!(TakenId::of(id), TakenId::of(id));
        let upper = id.to_ascii_uppercase();
        assert_eq!(TakenId::of(&upper), TakenId::Text(upper.clone()));
        assert_eq!(TakenId::of("order-7"), TakenId::Text("order-7".into()));
        let mut selection = Selection::new((0, 1000, 1000), HashSet::new(), None, None);
        assert!(selection.take(&entry(id, "k", 5)));
        assert!(!selection.take(&entry(id, "k", 5)), "a copy");
        assert!(selection.take(&entry(&upper, "k", 5)), "another id");
    }

    #[test]
    fn key_and_region_filters_leave_others_out() {
        let mut selection = Selection::new(
            (0, 1000, 1000),
            HashSet::new(),
            Some("k1".into()),
            Some("local".into()),
        );
        assert!(selection.take(&entry("a", "k1", 5)));
        assert!(!selection.take(&entry("b", "k2", 5)));
        let mut other_region = entry("c", "k1", 5);
        other_region.origin_region = "eu".into();
        assert!(!selection.take(&other_region));
        assert_eq!(selection.left[&Left::Filtered], 2);
    }
}
