package invalid.example.wal.client;

import java.util.Map;

/**
 * How a write (or a commit) ended.
 *
 * @param outcome TRUE, FALSE or UNKNOWN
 * @param entryId the entry's id: the caller's idempotency id or the one the library made (for a
 *     commit, the commit marker's id as the producer answered it)
 * @param attempts the attempts made, at least 1
 * @param message the producer's message when the outcome is not TRUE, else empty
 * @param destinations for a write with {@code awaitDestinations} that was stored: each
 *     destination of the namespace by name, and what it had done with the entry when the
 *     producer answered ("applied", "dead_lettered" or "pending"); empty otherwise
 */
public record WriteResult(Outcome outcome, String entryId, int attempts, String message,
    Map<String, String> destinations) {
  public WriteResult {
    destinations = Map.copyOf(destinations);
  }

  /** A result that names no destination. */
  public WriteResult(Outcome outcome, String entryId, int attempts, String message) {
    this(outcome, entryId, attempts, message, Map.of());
  }

  public boolean isTrue() {
    return outcome == Outcome.TRUE;
  }
}
