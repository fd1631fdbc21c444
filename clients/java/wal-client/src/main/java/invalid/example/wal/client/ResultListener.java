package invalid.example.wal.client;

/**
 * Told of every write's and commit's end, for metrics (off unless a client is given one). Called
 * on the thread that settles the result: keep it quick and do not block.
 */
@FunctionalInterface
public interface ResultListener {
  /**
   * @param outcome "TRUE", "FALSE", "UNKNOWN", or "REFUSED"
   * @param attempts the attempts the call took
   */
  void onResult(String outcome, int attempts);
}
