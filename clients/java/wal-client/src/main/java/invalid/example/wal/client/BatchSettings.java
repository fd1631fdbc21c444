package invalid.example.wal.client;

/**
 * How concurrent writes are batched.
 *
 * @param lingerNanos how long a batch's first write may wait for others
 * @param maxWrites the most writes of one batch (the producer takes 1000 at most)
 * @param maxBytes the most request bytes of one batch (a larger write goes alone)
 * @param inFlight how many batches may be out at once; 1 keeps writes of one key in order
 */
record BatchSettings(long lingerNanos, int maxWrites, long maxBytes, int inFlight) {}
