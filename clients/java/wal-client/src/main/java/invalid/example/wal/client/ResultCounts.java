package invalid.example.wal.client;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/** A {@link ResultListener} that counts results by outcome, and the attempts they took. */
public final class ResultCounts implements ResultListener {
  private final Map<String, LongAdder> results = new ConcurrentHashMap<>();
  private final Map<String, LongAdder> attempts = new ConcurrentHashMap<>();

  @Override
  public void onResult(String outcome, int attemptCount) {
    results.computeIfAbsent(outcome, k -> new LongAdder()).increment();
    attempts.computeIfAbsent(outcome, k -> new LongAdder()).add(attemptCount);
  }

  /** Results counted so far, by outcome. */
  public Map<String, Long> results() {
    return snapshot(results);
  }

  /** Attempts made so far, by the outcome of the call that made them. */
  public Map<String, Long> attempts() {
    return snapshot(attempts);
  }

  private static Map<String, Long> snapshot(Map<String, LongAdder> counts) {
    var copy = new TreeMap<String, Long>();
    counts.forEach((k, v) -> copy.put(k, v.sum()));
    return copy;
  }
}
