package invalid.example.wal.client;

import invalid.example.wal.v1.AbortTransactionRequest;
import invalid.example.wal.v1.AbortTransactionResponse;
import invalid.example.wal.v1.AppendItemsRequest;
import invalid.example.wal.v1.AppendItemsResponse;
import invalid.example.wal.v1.CommitTransactionRequest;
import invalid.example.wal.v1.TransactionItem;
import invalid.example.wal.v1.WriteToLogResponse;
import io.grpc.Deadline;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * Two-phase writes: stage the items in chunks, then commit. An append that fails in transport
 * (UNAVAILABLE included) is sent again identically, which the producer accepts and changes
 * nothing; a commit answered UNKNOWN is sent again until TRUE or the deadline. So calling again
 * with the same id and items after any failure (a lost commit answer included) completes the
 * transaction, applied once.
 */
final class TwoPhase {
  private final CallContext runtime;

  TwoPhase(CallContext runtime) {
    this.runtime = runtime;
  }

  /**
   * Stages every chunk in order, then commits, all within one deadline; the result is the
   * commit's. An append refused with FAILED_PRECONDITION (the transaction is already committed,
   * aborted or expired) goes on to the commit, which answers TRUE for a committed transaction
   * and names why otherwise: so a caller that lost the commit's answer resumes with the same
   * call. If the deadline ends before the commit was sent, nothing is committed: FALSE (or
   * RESOURCE_EXHAUSTED when the appends were shed).
   */
  CompletableFuture<WriteResult> run(String namespace, String transactionId, List<Item> items,
      int chunk, long deadlineNanos) {
    return stage(namespace, transactionId, items, chunk, 0, deadlineNanos);
  }

  private CompletableFuture<WriteResult> stage(String namespace, String transactionId,
      List<Item> items, int chunk, int from, long deadlineNanos) {
    if (from >= items.size()) {
      return commit(namespace, transactionId, items.size(), deadlineNanos);
    }
    int to = Math.min(from + chunk, items.size());
    AppendItemsRequest request = append(namespace, transactionId, items, from, to);
    return append(request, deadlineNanos).handle((staged, error) -> {
      if (error == null) {
        return stage(namespace, transactionId, items, chunk, to, deadlineNanos);
      }
      Throwable cause = error instanceof CompletionException && error.getCause() != null
          ? error.getCause() : error;
      if (cause instanceof RefusedException refused
          && refused.code() == Status.Code.FAILED_PRECONDITION) {
        return commit(namespace, transactionId, items.size(), deadlineNanos);
      }
      if (cause instanceof NoAnswerException unanswered) {
        return CompletableFuture.completedFuture(new WriteResult(Outcome.FALSE, "",
            unanswered.attempts(), "not committed: staging items " + from + " to " + (to - 1)
                + " ended at the deadline (" + unanswered.getMessage()
                + "); call again with the same id and items to resume"));
      }
      return CompletableFuture.<WriteResult>failedFuture(cause);
    }).thenCompose(next -> next);
  }

  CompletableFuture<AppendItemsResponse> append(AppendItemsRequest request, long deadlineNanos) {
    return new PlainCall<AppendItemsResponse>(runtime, deadlineNanos) {
      @Override
      void send(Endpoint producer, Deadline deadline,
          StreamObserver<AppendItemsResponse> answer) {
        producer.transactions.withDeadline(deadline).appendItems(request, answer);
      }
    }.start();
  }

  CompletableFuture<WriteResult> commit(String namespace, String transactionId, long itemCount,
      long deadlineNanos) {
    var request = CommitTransactionRequest.newBuilder()
        .setNamespace(namespace)
        .setTransactionId(transactionId)
        .setItemCount(itemCount)
        .build();
    return new TrileanCall(runtime, deadlineNanos, "") {
      @Override
      void send(Endpoint producer, Deadline deadline, StreamObserver<WriteToLogResponse> answer) {
        producer.transactions.withDeadline(deadline).commitTransaction(request, answer);
      }
    }.start();
  }

  CompletableFuture<AbortResult> abort(String namespace, String transactionId,
      long deadlineNanos) {
    var request = AbortTransactionRequest.newBuilder()
        .setNamespace(namespace)
        .setTransactionId(transactionId)
        .build();
    var call = new PlainCall<AbortTransactionResponse>(runtime, deadlineNanos) {
      @Override
      void send(Endpoint producer, Deadline deadline,
          StreamObserver<AbortTransactionResponse> answer) {
        producer.transactions.withDeadline(deadline).abortTransaction(request, answer);
      }
    };
    return call.start().thenApply(done -> new AbortResult(call.progress.attempts));
  }

  /** The request staging items {@code from} to {@code to - 1}, numbered by their place. */
  private static AppendItemsRequest append(String namespace, String transactionId,
      List<Item> items, int from, int to) {
    var request = AppendItemsRequest.newBuilder()
        .setNamespace(namespace)
        .setTransactionId(transactionId);
    for (int i = from; i < to; i++) {
      Item item = items.get(i);
      var staged = TransactionItem.newBuilder()
          .setSequence(i)
          .setPayload(com.google.protobuf.ByteString.copyFrom(item.payload()));
      if (item.target() != null) {
        staged.setTarget(item.target().toProto());
      }
      request.addItems(staged);
    }
    return request.build();
  }
}
