package invalid.example.wal.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class BackoffTest {
  private final Backoff backoff = new Backoff(Duration.ofMillis(50), Duration.ofSeconds(2),
      new SplittableRandom(7));

  @Test
  void stepsDoubleFrom50MillisAndStopAt2Seconds() {
    long[] millis = {50, 100, 200, 400, 800, 1600, 2000, 2000};
    for (int retry = 0; retry < millis.length; retry++) {
      assertEquals(Duration.ofMillis(millis[retry]).toNanos(), backoff.stepNanos(retry));
    }
    assertEquals(Duration.ofSeconds(2).toNanos(), backoff.stepNanos(10_000));
  }

  @Test
  void waitsAreFullJitterWithinTheStep() {
    for (int retry = 0; retry < 12; retry++) {
      long step = backoff.stepNanos(retry);
      long min = Long.MAX_VALUE;
      long max = 0;
      for (int i = 0; i < 2000; i++) {
        long wait = backoff.nanos(retry);
        assertTrue(wait >= 0 && wait <= step, "wait " + wait + " outside [0, " + step + "]");
        min = Math.min(min, wait);
        max = Math.max(max, wait);
      }
      // Full jitter: the waits spread over the whole step, not around it.
      assertTrue(min < step / 10, "smallest wait " + min + " of step " + step);
      assertTrue(max > step * 9 / 10, "largest wait " + max + " of step " + step);
    }
  }

  @Test
  void aShedWaitsWhatTheProducerAsksPlusUpToAsMuchAgain() {
    long asked = Duration.ofMillis(40).toNanos();
    for (int i = 0; i < 2000; i++) {
      long wait = backoff.shedNanos(asked);
      assertTrue(wait >= asked && wait <= 2 * asked, "shed wait " + wait);
    }
  }
}
