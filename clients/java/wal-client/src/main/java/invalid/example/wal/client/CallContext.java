package invalid.example.wal.client;

import java.util.concurrent.ScheduledExecutorService;
import java.util.function.LongSupplier;

/** What every call of one client shares: its producers, its backoff, its timer and its clock. */
record CallContext(ProducerPool pool, Backoff backoff, ScheduledExecutorService timer,
    LongSupplier clock) {}
