package invalid.example.wal.client;

/** A call whose any answer ends it (AppendItems, AbortTransaction): only failures are retried. */
abstract class PlainCall<Q> extends RetryLoop<Q, Q> {
  PlainCall(CallContext runtime, long deadlineNanos) {
    super(runtime, deadlineNanos);
  }

  @Override
  Q answered(Q response) {
    return response;
  }

  @Override
  Q atDeadline() {
    throw progress.callAtDeadline();
  }
}
