package invalid.example.wal.client;

import java.time.Duration;
import java.util.List;
import java.util.function.LongSupplier;

/**
 * The producers a client sends to, round robin. One whose call failed in transport is skipped for
 * a pause (1 s, doubling up to 30 s while it keeps failing); after the pause one call tries it
 * again (a probe), and an answer puts it back in the rotation. When every producer is skipped,
 * the one whose pause ends first is tried.
 */
final class ProducerPool {
  private final List<Endpoint> endpoints;
  private final long initialPauseNanos;
  private final long maxPauseNanos;
  private final LongSupplier clock;
  private int next;

  ProducerPool(List<Endpoint> endpoints, Duration initialPause, Duration maxPause,
      LongSupplier clock) {
    if (endpoints.isEmpty()) {
      throw new IllegalArgumentException("a client needs at least one producer address");
    }
    this.endpoints = List.copyOf(endpoints);
    this.initialPauseNanos = initialPause.toNanos();
    this.maxPauseNanos = maxPause.toNanos();
    this.clock = clock;
  }

  List<Endpoint> endpoints() {
    return endpoints;
  }

  /**
   * The producer for the next call: the next one in turn that is not skipped, other than {@code
   * avoid} (the one a retry's previous attempt failed on) when there is such another.
   */
  synchronized Endpoint pick(Endpoint avoid) {
    long now = clock.getAsLong();
    int n = endpoints.size();
    Endpoint fallback = null;
    for (int i = 0; i < n; i++) {
      int index = (next + i) % n;
      Endpoint e = endpoints.get(index);
      if (!usable(e, now)) {
        continue;
      }
      if (e == avoid && n > 1) {
        fallback = fallback == null ? e : fallback;
        continue;
      }
      next = index + 1;
      return take(e);
    }
    if (fallback != null) {
      next = endpoints.indexOf(fallback) + 1;
      return take(fallback);
    }
    // Every producer is skipped: the one whose pause ends first.
    Endpoint soonest = endpoints.get(0);
    for (Endpoint e : endpoints) {
      if (e.pausedUntilNanos - soonest.pausedUntilNanos < 0) {
        soonest = e;
      }
    }
    return soonest;
  }

  /** The producer answered (any gRPC answer, a refusal too): it is back in the rotation. */
  synchronized void answered(Endpoint e) {
    e.failures = 0;
    e.paused = false;
    e.probing = false;
  }

  /** The producer's call failed in transport: skip it for a pause that doubles while it fails. */
  synchronized void failed(Endpoint e) {
    long now = clock.getAsLong();
    if (e.paused && !e.probing && e.pausedUntilNanos - now > 0) {
      return; // calls already in flight when it failed: one failure, one pause
    }
    e.failures++;
    long pause = initialPauseNanos;
    for (int i = 1; i < e.failures && pause < maxPauseNanos; i++) {
      pause = Math.min(pause * 2, maxPauseNanos);
    }
    e.paused = true;
    e.probing = false;
    e.pausedUntilNanos = now + Math.min(pause, maxPauseNanos);
  }

  /** Not skipped: healthy, or its pause is over and no probe is out. */
  private static boolean usable(Endpoint e, long now) {
    return !e.paused || (!e.probing && e.pausedUntilNanos - now <= 0);
  }

  /** A paused producer whose pause is over gets one call, the probe, before any other. */
  private static Endpoint take(Endpoint e) {
    if (e.paused) {
      e.probing = true;
      if (e.channel != null) {
        // gRPC's own reconnect backoff may be longer than our pause: let the probe connect now.
        e.channel.resetConnectBackoff();
      }
    }
    return e;
  }
}
