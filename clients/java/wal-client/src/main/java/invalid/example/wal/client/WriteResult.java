package invalid.example.wal.client;

/**
 * How a write (or a commit) ended.
 *
 * @param outcome TRUE, FALSE or UNKNOWN
 * @param entryId the entry's id: the caller's idempotency id or the one the library made (for a
 *     commit, the commit marker's id as the producer answered it)
 * @param attempts the attempts made, at least 1
 * @param message the producer's message when the outcome is not TRUE, else empty
 */
public record WriteResult(Outcome outcome, String entryId, int attempts, String message) {
  public boolean isTrue() {
    return outcome == Outcome.TRUE;
  }
}
