package invalid.example.wal.client;

import invalid.example.wal.v1.WriteToLogRequest;
import java.util.concurrent.CompletableFuture;

/** A write waiting in the batcher: its request (id fixed), deadline, and what is known of it. */
final class PendingWrite {
  final long seq;
  final WriteToLogRequest request;
  final TraceContext trace;
  final long deadlineNanos;
  final int bytes;
  final Progress progress = new Progress();
  final CompletableFuture<WriteResult> result = new CompletableFuture<>();
  /** When it may be sent (a retry waits for its backoff), and since when it has been ready. */
  long readyAtNanos;

  PendingWrite(long seq, WriteToLogRequest request, TraceContext trace, long deadlineNanos,
      long nowNanos) {
    this.seq = seq;
    this.request = request;
    this.trace = trace;
    this.deadlineNanos = deadlineNanos;
    this.bytes = request.getSerializedSize();
    this.readyAtNanos = nowNanos;
  }

  String id() {
    return request.getIdempotencyId();
  }

  /** Completes it with what is known at its deadline. */
  void settleAtDeadline() {
    try {
      result.complete(progress.writeAtDeadline(id()));
    } catch (RuntimeException e) {
      result.completeExceptionally(e);
    }
  }
}
