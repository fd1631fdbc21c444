package invalid.example.wal.client;

import io.grpc.Deadline;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * One unary call retried until a final answer or its deadline: transport failures are retried
 * (on another producer when there is one) after the backoff, sheds after the wait the producer
 * asks for, refusals end it. No attempt starts after the deadline, and each attempt's gRPC
 * deadline is the time left, so the result is known by the deadline.
 *
 * @param <Q> the response message
 * @param <R> the call's result
 */
abstract class RetryLoop<Q, R> {
  /** No attempt starts in the deadline's last millisecond: it could not get an answer. */
  static final long MIN_ATTEMPT_NANOS = 1_000_000;

  final CallContext runtime;
  final long deadlineNanos;
  final Progress progress = new Progress();
  final CompletableFuture<R> result = new CompletableFuture<>();
  private Endpoint avoid;

  RetryLoop(CallContext runtime, long deadlineNanos) {
    this.runtime = runtime;
    this.deadlineNanos = deadlineNanos;
  }

  /** Sends one attempt to {@code producer}. */
  abstract void send(Endpoint producer, Deadline deadline, StreamObserver<Q> answer);

  /** The result of an answer, or null when it is UNKNOWN (recorded in progress) and retried. */
  abstract R answered(Q response);

  /** The result when no attempt may start before the deadline (may throw a WalException). */
  abstract R atDeadline();

  CompletableFuture<R> start() {
    if (runtime.clock().getAsLong() - deadlineNanos >= 0) {
      settleAtDeadline();
    } else {
      attempt();
    }
    return result;
  }

  private void attempt() {
    Endpoint producer = runtime.pool().pick(avoid);
    progress.attempts++;
    long left = deadlineNanos - runtime.clock().getAsLong();
    try {
      send(producer, Deadline.after(Math.max(left, 0), TimeUnit.NANOSECONDS),
          new Observer(producer));
    } catch (RuntimeException e) {
      failed(producer, e);
    }
  }

  private void failed(Endpoint producer, Throwable error) {
    Status status = Status.fromThrowable(error);
    String message = Codes.message(status);
    switch (Codes.kind(status.getCode())) {
      case REFUSED -> {
        runtime.pool().answered(producer);
        result.completeExceptionally(new RefusedException(
            status.getCode(), Codes.field(error), message, progress.attempts));
      }
      case SHED -> {
        runtime.pool().answered(producer);
        progress.shed(message);
        long asked = Codes.retryDelayNanos(error);
        retryAfter(asked > 0 ? runtime.backoff().shedNanos(asked)
            : runtime.backoff().nanos(progress.retries++));
      }
      case TRANSPORT -> {
        // DEADLINE_EXCEEDED is the caller's budget running out, not the producer failing.
        if (status.getCode() != Status.Code.DEADLINE_EXCEEDED) {
          runtime.pool().failed(producer);
        }
        progress.transport(status.getCode(), message);
        avoid = producer;
        retryAfter(runtime.backoff().nanos(progress.retries++));
      }
    }
  }

  /**
   * Retries after the wait. A wait that would end past the deadline ends at it instead, and the
   * call then settles with what is known: it is retried until its deadline, not given up early.
   */
  void retryAfter(long waitNanos) {
    long left = deadlineNanos - runtime.clock().getAsLong();
    Runnable next = waitNanos + MIN_ATTEMPT_NANOS < left ? this::attempt : this::settleAtDeadline;
    try {
      runtime.timer().schedule(next, Math.max(Math.min(waitNanos, left), 0),
          TimeUnit.NANOSECONDS);
    } catch (java.util.concurrent.RejectedExecutionException closed) {
      settleAtDeadline();
    }
  }

  private void settleAtDeadline() {
    try {
      result.complete(atDeadline());
    } catch (RuntimeException e) {
      result.completeExceptionally(e);
    }
  }

  private final class Observer implements StreamObserver<Q> {
    private final Endpoint producer;

    Observer(Endpoint producer) {
      this.producer = producer;
    }

    @Override
    public void onNext(Q response) {
      runtime.pool().answered(producer);
      avoid = null;
      R done;
      try {
        done = answered(response);
      } catch (RuntimeException e) {
        result.completeExceptionally(e);
        return;
      }
      if (done != null) {
        result.complete(done);
      } else {
        retryAfter(runtime.backoff().nanos(progress.retries++));
      }
    }

    @Override
    public void onError(Throwable error) {
      failed(producer, error);
    }

    @Override
    public void onCompleted() {}
  }
}
