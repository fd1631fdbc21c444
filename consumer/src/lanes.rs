//! Key lanes: the entries of one key, one at a time, in the order they were received. A
//! replicating reader needs them: a later write of a key must not reach a destination before an
//! earlier one still retrying (a cache keeps no write times to sort them out).
//!
//! The worker joins each entry to its key's lane as it receives it (in queue order) and the
//! entry's task waits for its [`Turn`] before it delivers; the turn passes on when the task ends,
//! however it ends. Entries of other keys go on meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

#[derive(Debug, Default)]
pub struct KeyLanes {
    /// Per key with an entry in progress: the last entry's number and its end.
    tails: Mutex<HashMap<String, (u64, oneshot::Receiver<()>)>>,
    next: std::sync::atomic::AtomicU64,
}

/// An entry's place in its key's lane: wait for it, then work; dropping it lets the next go.
#[derive(Debug)]
pub struct Turn {
    lanes: Arc<KeyLanes>,
    key: String,
    number: u64,
    before: Option<oneshot::Receiver<()>>,
    _done: oneshot::Sender<()>,
}

impl KeyLanes {
    /// Joins `key`'s lane behind every entry of it joined before.
    pub fn join(self: &Arc<Self>, key: &str) -> Turn {
        let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (done, end) = oneshot::channel();
        let before = self
            .tails
            .lock()
            .map(|mut tails| {
                tails
                    .insert(key.to_owned(), (number, end))
                    .map(|(_, before)| before)
            })
            .unwrap_or(None);
        Turn {
            lanes: Arc::clone(self),
            key: key.to_owned(),
            number,
            before,
            _done: done,
        }
    }

    /// Keys with an entry in progress.
    pub fn len(&self) -> usize {
        self.tails.lock().map_or(0, |tails| tails.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Turn {
    /// Waits until every earlier entry of the key has ended.
    pub async fn wait(&mut self) {
        if let Some(before) = self.before.take() {
            // A dropped sender is an ended entry too.
            let _ = before.await;
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // The last of its key: forget the key, so the map holds only keys in progress.
        if let Ok(mut tails) = self.lanes.tails.lock()
            && tails.get(&self.key).is_some_and(|(n, _)| *n == self.number)
        {
            tails.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_key_goes_in_order_and_other_keys_go_on() {
        let lanes = Arc::new(KeyLanes::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, key) in ["a", "b", "a", "a", "b"].into_iter().enumerate() {
            let mut turn = lanes.join(key);
            let order = Arc::clone(&order);
            tasks.push(tokio::spawn(async move {
                turn.wait().await;
                // The first "a" is slow: the later "a"s wait for it, the "b"s do not.
                if i == 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                order.lock().unwrap().push(format!("{key}{i}"));
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        let of = |key: &str| -> Vec<String> {
            order
                .iter()
                .filter(|o| o.starts_with(key))
                .cloned()
                .collect()
        };
        assert_eq!(of("a"), ["a0", "a2", "a3"]);
        assert_eq!(of("b"), ["b1", "b4"]);
        assert_eq!(order.last().map(String::as_str), Some("a3"), "{order:?}");
        assert!(lanes.is_empty(), "finished keys are forgotten");
    }

    #[tokio::test]
    async fn a_turn_dropped_without_waiting_still_lets_the_next_go() {
        let lanes = Arc::new(KeyLanes::default());
        let first = lanes.join("k");
        let mut second = lanes.join("k");
        drop(first);
        tokio::time::timeout(Duration::from_secs(1), second.wait())
            .await
            .expect("the next entry goes");
    }
}
