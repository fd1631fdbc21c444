package invalid.example.wal.client;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.random.RandomGenerator;

/**
 * The waits between attempts: exponential with full jitter (a uniformly random wait between zero
 * and the current step), so that many clients retrying at once spread out; and the wait a shed
 * write owes the producer's rate limit, plus a random share of up to that wait again, so that
 * writes shed together do not come back together.
 */
final class Backoff {
  private final long initialNanos;
  private final long maxNanos;
  private final RandomGenerator random;

  Backoff(Duration initial, Duration max) {
    this(initial, max, null);
  }

  /** With a fixed random source, for tests; null: the thread's own. */
  Backoff(Duration initial, Duration max, RandomGenerator random) {
    if (initial.isNegative() || initial.isZero() || max.compareTo(initial) < 0) {
      throw new IllegalArgumentException("backoff needs 0 < initial <= max");
    }
    this.initialNanos = initial.toNanos();
    this.maxNanos = max.toNanos();
    this.random = random;
  }

  /** The step before retry number {@code retry} (0 for the first retry): doubling, capped. */
  long stepNanos(int retry) {
    int doublings = Math.min(retry, 62);
    long step = initialNanos;
    for (int i = 0; i < doublings && step < maxNanos; i++) {
      step = step > maxNanos / 2 ? maxNanos : step * 2;
    }
    return Math.min(step, maxNanos);
  }

  /** The wait before retry number {@code retry}: uniform in [0, step]. */
  long nanos(int retry) {
    return uniform(stepNanos(retry));
  }

  /** The wait after a shed whose producer asked for {@code askedNanos}: in [asked, 2 * asked]. */
  long shedNanos(long askedNanos) {
    return askedNanos + uniform(askedNanos);
  }

  private long uniform(long bound) {
    RandomGenerator r = random != null ? random : ThreadLocalRandom.current();
    return bound <= 0 ? 0 : r.nextLong(bound + 1);
  }
}
