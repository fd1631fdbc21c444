package invalid.example.wal.client;

import invalid.example.wal.v1.WriteToLogResponse;

/**
 * A call answered with the Trilean (WriteToLog, CommitTransaction): TRUE and FALSE end it,
 * UNKNOWN is retried with the same request (so the same idempotency id) until the deadline.
 */
abstract class TrileanCall extends RetryLoop<WriteToLogResponse, WriteResult> {
  private String entryId;

  TrileanCall(CallContext runtime, long deadlineNanos, String entryId) {
    super(runtime, deadlineNanos);
    this.entryId = entryId;
  }

  @Override
  WriteResult answered(WriteToLogResponse response) {
    if (!response.getEntryId().isEmpty()) {
      entryId = response.getEntryId();
    }
    return switch (response.getDurable()) {
      case TRILEAN_TRUE -> new WriteResult(Outcome.TRUE, entryId, progress.attempts, "",
          destinations(response));
      case TRILEAN_FALSE ->
          new WriteResult(Outcome.FALSE, entryId, progress.attempts, response.getMessage());
      default -> {
        // UNKNOWN, and TRILEAN_UNSPECIFIED which the producer never sends: may be stored.
        progress.unknown(response.getMessage());
        yield null;
      }
    };
  }

  /** What each destination had done, by name, as {@link WriteResult#destinations()} has it. */
  static java.util.Map<String, String> destinations(WriteToLogResponse response) {
    var named = new java.util.TreeMap<String, String>();
    for (var d : response.getDestinationsList()) {
      named.put(d.getDestination(), switch (d.getState()) {
        case DESTINATION_STATE_APPLIED -> "applied";
        case DESTINATION_STATE_DEAD_LETTERED -> "dead_lettered";
        default -> "pending";
      });
    }
    return named;
  }

  @Override
  WriteResult atDeadline() {
    return progress.writeAtDeadline(entryId == null ? "" : entryId);
  }
}
