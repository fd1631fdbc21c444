package invalid.example.wal.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class ProducerPoolTest {
  private final AtomicLong now = new AtomicLong(1_000_000_000L);
  private final Endpoint a = new Endpoint("a", null);
  private final Endpoint b = new Endpoint("b", null);
  private final Endpoint c = new Endpoint("c", null);
  private final ProducerPool pool = new ProducerPool(List.of(a, b, c), Duration.ofSeconds(1),
      Duration.ofSeconds(30), now::get);

  private void advance(Duration d) {
    now.addAndGet(d.toNanos());
  }

  @Test
  void callsGoRoundRobin() {
    assertSame(a, pool.pick(null));
    assertSame(b, pool.pick(null));
    assertSame(c, pool.pick(null));
    assertSame(a, pool.pick(null));
  }

  @Test
  void aFailedProducerIsSkippedForItsPauseThenProbedOnce() {
    assertSame(a, pool.pick(null));
    pool.failed(a);
    for (int i = 0; i < 4; i++) {
      Endpoint e = pool.pick(null);
      assertEquals(true, e == b || e == c, "skips a while paused, got " + e);
    }
    advance(Duration.ofMillis(1001));
    // The pause is over: one call tries it again, and no other until that probe answers.
    Endpoint probe = null;
    for (int i = 0; i < 3 && probe == null; i++) {
      Endpoint e = pool.pick(null);
      probe = e == a ? e : null;
    }
    assertSame(a, probe);
    for (int i = 0; i < 4; i++) {
      Endpoint e = pool.pick(null);
      assertEquals(true, e != a, "a probe is out: a is skipped, got " + e);
    }
    pool.answered(a);
    boolean back = false;
    for (int i = 0; i < 3; i++) {
      back |= pool.pick(null) == a;
    }
    assertEquals(true, back, "an answer puts it back in the rotation");
  }

  @Test
  void thePauseDoublesWhileItKeepsFailingUpTo30Seconds() {
    long[] seconds = {1, 2, 4, 8, 16, 30, 30};
    for (long pause : seconds) {
      pool.failed(a);
      assertEquals(now.get() + Duration.ofSeconds(pause).toNanos(), a.pausedUntilNanos);
      advance(Duration.ofSeconds(pause));
      while (pool.pick(null) != a) {
        // until the probe
      }
    }
  }

  @Test
  void failuresOfCallsAlreadyInFlightCountOnce() {
    pool.failed(a);
    pool.failed(a);
    pool.failed(a);
    assertEquals(1, a.failures);
  }

  @Test
  void whenEveryProducerIsSkippedTheOneWhosePauseEndsFirstIsTried() {
    pool.failed(b);
    advance(Duration.ofMillis(100));
    pool.failed(a);
    advance(Duration.ofMillis(100));
    pool.failed(c);
    assertSame(b, pool.pick(null));
    assertSame(b, pool.pick(null));
  }

  @Test
  void aRetryGoesToAnotherProducerWhenThereIsOne() {
    assertSame(a, pool.pick(null));
    assertSame(c, pool.pick(b));
    var single = new ProducerPool(List.of(a), Duration.ofSeconds(1), Duration.ofSeconds(30),
        now::get);
    assertSame(a, single.pick(a));
  }
}
