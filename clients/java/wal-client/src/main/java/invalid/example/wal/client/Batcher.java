package invalid.example.wal.client;

import invalid.example.wal.v1.WriteToLogBatchRequest;
import invalid.example.wal.v1.WriteToLogBatchResponse;
import invalid.example.wal.v1.WriteToLogRequest;
import io.grpc.Deadline;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Sends concurrent writes together in {@code WriteToLogBatch} calls. A batch leaves when it holds
 * the cap or when its first write has waited the linger; writes go in the order they were made,
 * with at most {@code inFlight} batches out at once (one by default, so that writes of one key
 * reach the queue in order). Each write is answered on its own; one that must be retried goes
 * into a later batch with its id, after its backoff, and the others are not retried.
 */
final class Batcher {
  private final CallContext runtime;
  private final BatchSettings settings;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  /** Writes not yet answered and not in flight, in the order they were made. */
  private final TreeMap<Long, PendingWrite> queue = new TreeMap<>();
  private final Thread sender;
  private long nextSeq;
  private int inFlight;
  private boolean closing;
  /** The producer the last batch failed on in transport, so that the next one goes elsewhere. */
  private volatile Endpoint avoid;

  Batcher(CallContext runtime, BatchSettings settings) {
    this.runtime = runtime;
    this.settings = settings;
    this.sender = new Thread(this::run, "wal-client-batcher");
    this.sender.setDaemon(true);
    this.sender.start();
  }

  CompletableFuture<WriteResult> submit(WriteToLogRequest request,
      TraceContext trace, long deadlineNanos) {
    lock.lock();
    try {
      if (closing) {
        throw new IllegalStateException("the client is closed");
      }
      var write = new PendingWrite(nextSeq++, request, trace, deadlineNanos,
          runtime.clock().getAsLong());
      queue.put(write.seq, write);
      changed.signalAll();
      return write.result;
    } finally {
      lock.unlock();
    }
  }

  /** Sends what is queued without waiting the linger, then waits until every write is answered. */
  void close() {
    lock.lock();
    try {
      closing = true;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
    try {
      sender.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void run() {
    while (true) {
      List<PendingWrite> expired = new ArrayList<>();
      List<PendingWrite> batch = null;
      lock.lock();
      try {
        long now = runtime.clock().getAsLong();
        long wake = Long.MAX_VALUE;
        List<PendingWrite> ready = new ArrayList<>();
        for (Iterator<PendingWrite> it = queue.values().iterator(); it.hasNext(); ) {
          PendingWrite w = it.next();
          if (w.deadlineNanos - now <= 0) {
            it.remove();
            expired.add(w);
          } else if (w.readyAtNanos - now <= 0) {
            ready.add(w);
            wake = Math.min(wake, w.deadlineNanos - now);
          } else {
            wake = Math.min(wake, Math.min(w.readyAtNanos, w.deadlineNanos) - now);
          }
        }
        if (!ready.isEmpty() && inFlight < settings.inFlight()) {
          List<Integer> sizes = ready.stream().map(w -> w.bytes).toList();
          long lingerEnd = ready.get(0).readyAtNanos + settings.lingerNanos();
          if (closing || lingerEnd - now <= 0
              || BatchCut.full(sizes, settings.maxWrites(), settings.maxBytes())) {
            int n = BatchCut.cut(sizes, settings.maxWrites(), settings.maxBytes());
            batch = new ArrayList<>(ready.subList(0, n));
            batch.forEach(w -> queue.remove(w.seq));
            inFlight++;
          } else {
            wake = Math.min(wake, lingerEnd - now);
          }
        }
        if (batch == null && expired.isEmpty()) {
          if (closing && queue.isEmpty() && inFlight == 0) {
            return;
          }
          if (wake == Long.MAX_VALUE) {
            changed.await();
          } else {
            changed.awaitNanos(wake);
          }
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      } finally {
        lock.unlock();
      }
      expired.forEach(PendingWrite::settleAtDeadline);
      if (batch != null) {
        send(batch);
      }
    }
  }

  private void send(List<PendingWrite> batch) {
    Endpoint producer = runtime.pool().pick(avoid);
    var request = WriteToLogBatchRequest.newBuilder();
    long deadline = Long.MAX_VALUE;
    for (PendingWrite w : batch) {
      request.addWrites(w.request);
      w.progress.attempts++;
      // The call's deadline is its earliest write's, so no write waits past its own.
      deadline = deadline == Long.MAX_VALUE ? w.deadlineNanos
          : (w.deadlineNanos - deadline < 0 ? w.deadlineNanos : deadline);
    }
    long left = Math.max(deadline - runtime.clock().getAsLong(), 0);
    var observer = new Answer(producer, batch);
    try {
      TraceContext.attach(producer.writes, batch.get(0).trace)
          .withDeadline(Deadline.after(left, TimeUnit.NANOSECONDS))
          .writeToLogBatch(request.build(), observer);
    } catch (RuntimeException e) {
      observer.onError(e);
    }
  }

  /** Settles or requeues each write of a batch once its call is answered or failed. */
  private final class Answer implements StreamObserver<WriteToLogBatchResponse> {
    private final Endpoint producer;
    private final List<PendingWrite> batch;
    private final List<Runnable> settled = new ArrayList<>();
    private final List<PendingWrite> retried = new ArrayList<>();
    private final List<Long> waits = new ArrayList<>();

    Answer(Endpoint producer, List<PendingWrite> batch) {
      this.producer = producer;
      this.batch = batch;
    }

    @Override
    public void onNext(WriteToLogBatchResponse response) {
      runtime.pool().answered(producer);
      avoid = null;
      if (response.getResultsCount() != batch.size()) {
        // Not the answer the API promises: nobody can tell which write it stored.
        Status broken = Status.INTERNAL.withDescription("the batch answered "
            + response.getResultsCount() + " results for " + batch.size() + " writes");
        batch.forEach(w -> transport(w, broken));
      } else {
        for (int i = 0; i < batch.size(); i++) {
          one(batch.get(i), response.getResults(i));
        }
      }
      finish();
    }

    @Override
    public void onError(Throwable error) {
      Status status = Status.fromThrowable(error);
      String message = Codes.message(status);
      switch (Codes.kind(status.getCode())) {
        case TRANSPORT -> {
          // DEADLINE_EXCEEDED is the earliest write's budget running out, not the producer
          // failing: the producer stays in the rotation.
          if (status.getCode() != Status.Code.DEADLINE_EXCEEDED) {
            runtime.pool().failed(producer);
            avoid = producer;
          }
          batch.forEach(w -> transport(w, status));
        }
        case SHED -> {
          runtime.pool().answered(producer);
          long asked = Codes.retryDelayNanos(error);
          batch.forEach(w -> shed(w, message, asked));
        }
        case REFUSED -> {
          runtime.pool().answered(producer);
          String field = Codes.field(error);
          batch.forEach(w -> refuse(w, status.getCode(), field, message));
        }
      }
      finish();
    }

    @Override
    public void onCompleted() {}

    private void one(PendingWrite w, invalid.example.wal.v1.WriteResult r) {
      if (r.getCode() == 0) {
        var answer = r.getResponse();
        String id = answer.getEntryId().isEmpty() ? w.id() : answer.getEntryId();
        int attempts = w.progress.attempts;
        switch (answer.getDurable()) {
          case TRILEAN_TRUE -> settled.add(() -> w.result.complete(
              new WriteResult(Outcome.TRUE, id, attempts, "")));
          case TRILEAN_FALSE -> settled.add(() -> w.result.complete(
              new WriteResult(Outcome.FALSE, id, attempts,
                  answer.getMessage())));
          default -> {
            w.progress.unknown(answer.getMessage());
            retry(w, runtime.backoff().nanos(w.progress.retries++));
          }
        }
        return;
      }
      Status.Code code = Status.fromCodeValue(r.getCode()).getCode();
      switch (Codes.kind(code)) {
        case SHED -> shed(w, r.getError(),
            r.getRetryAfterMillis() > 0 ? TimeUnit.MILLISECONDS.toNanos(r.getRetryAfterMillis())
                : -1);
        case TRANSPORT -> transport(w, Status.fromCode(code).withDescription(r.getError()));
        case REFUSED -> refuse(w, code, r.getField(), r.getError());
      }
    }

    private void transport(PendingWrite w, Status status) {
      w.progress.transport(status.getCode(), Codes.message(status));
      retry(w, runtime.backoff().nanos(w.progress.retries++));
    }

    private void shed(PendingWrite w, String message, long askedNanos) {
      w.progress.shed(message);
      retry(w, askedNanos > 0 ? runtime.backoff().shedNanos(askedNanos)
          : runtime.backoff().nanos(w.progress.retries++));
    }

    private void refuse(PendingWrite w, Status.Code code, String field, String message) {
      int attempts = w.progress.attempts;
      settled.add(() -> w.result.completeExceptionally(
          new RefusedException(code, field, message, attempts)));
    }

    private void retry(PendingWrite w, long waitNanos) {
      retried.add(w);
      waits.add(waitNanos);
    }

    /** Puts the retried writes back (or settles those whose deadline comes first), then frees
     *  the in-flight slot; completes the futures outside the lock. */
    private void finish() {
      lock.lock();
      try {
        long now = runtime.clock().getAsLong();
        for (int i = 0; i < retried.size(); i++) {
          PendingWrite w = retried.get(i);
          // A wait past the deadline ends at it: the sender settles the write then, so that
          // it is retried until its deadline, not given up early.
          long readyAt = now + waits.get(i);
          w.readyAtNanos = readyAt + RetryLoop.MIN_ATTEMPT_NANOS - w.deadlineNanos < 0 ? readyAt
              : w.deadlineNanos;
          queue.put(w.seq, w);
        }
        inFlight--;
        changed.signalAll();
      } finally {
        lock.unlock();
      }
      settled.forEach(Runnable::run);
    }
  }
}
