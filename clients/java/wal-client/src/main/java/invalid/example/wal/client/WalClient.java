package invalid.example.wal.client;

import io.grpc.Deadline;
import io.grpc.stub.StreamObserver;
import invalid.example.wal.v1.WriteToLogRequest;
import invalid.example.wal.v1.WriteToLogResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A client of the WAL producers: writes answered TRUE, FALSE or UNKNOWN, retried as the
 * platform's client libraries all do (see clients/BEHAVIOUR.md), and two-phase transactions.
 *
 * <pre>{@code
 * try (WalClient client = WalClient.builder().producers(List.of("127.0.0.1:50051")).build()) {
 *   WriteResult r = client.write(Write.builder("orders", bytes).key("order-7").build());
 * }
 * }</pre>
 *
 * <p>Thread-safe; make one per process and share it. Writes made concurrently with {@link
 * #writeAsync} are batched.
 */
public final class WalClient implements AutoCloseable {
  private final CallContext runtime;
  private final Duration defaultDeadline;
  private final boolean batching;
  private final int chunk;
  private final ResultListener listener;
  private final Batcher batcher;
  private final TwoPhase twoPhase;
  private final AtomicInteger outstanding = new AtomicInteger();
  private volatile boolean closed;

  private WalClient(Builder b, List<Endpoint> endpoints) {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(task -> {
      Thread t = new Thread(task, "wal-client-retries");
      t.setDaemon(true);
      return t;
    });
    var pool = new ProducerPool(endpoints, b.pause, b.maxPause, System::nanoTime);
    this.runtime = new CallContext(pool, new Backoff(b.backoff, b.maxBackoff), timer,
        System::nanoTime);
    this.defaultDeadline = b.deadline;
    this.batching = b.batching;
    this.chunk = b.chunk;
    this.listener = b.listener;
    this.batcher = new Batcher(runtime, new BatchSettings(b.linger.toNanos(), b.maxBatchWrites,
        b.maxBatchBytes, b.batchesInFlight));
    this.twoPhase = new TwoPhase(runtime);
  }

  public static Builder builder() {
    return new Builder();
  }

  /**
   * Writes and waits for the answer, by the write's deadline: TRUE, FALSE, or UNKNOWN when the
   * deadline ended first.
   *
   * @throws RefusedException when the producer refused the write (nothing stored)
   */
  public WriteResult write(Write write) {
    return await(writeAsync(write));
  }

  /**
   * Starts a write; concurrent ones share {@code WriteToLogBatch} calls unless batching is off
   * (for the client or the write). The future completes by the write's deadline, exceptionally
   * with a {@link RefusedException} for a refusal.
   */
  public CompletableFuture<WriteResult> writeAsync(Write write) {
    Objects.requireNonNull(write, "write");
    String id = write.idempotencyId() == null || write.idempotencyId().isEmpty()
        ? Ids.uuidV7() : write.idempotencyId();
    WriteToLogRequest request = write.toRequest(id);
    TraceContext trace = TraceContext.of(write.traceparent(), write.tracestate());
    long deadline = deadline(write.deadline());
    boolean batched = write.awaitDestinationsMillis() == 0
        && (write.batch() != null ? write.batch() : batching);
    begin();
    CompletableFuture<WriteResult> result;
    if (batched) {
      try {
        result = batcher.submit(request, trace, deadline);
      } catch (RuntimeException closing) {
        end();
        throw closing;
      }
    } else {
      result = new TrileanCall(runtime, deadline, id) {
        @Override
        void send(Endpoint producer, Deadline attempt, StreamObserver<WriteToLogResponse> answer) {
          TraceContext.attach(producer.writes, trace).withDeadline(attempt)
              .writeToLog(request, answer);
        }
      }.start();
    }
    return track(result);
  }

  /** {@link #transaction(String, String, List, int, Duration)} with the client's chunk. */
  public WriteResult transaction(String namespace, String transactionId, List<Item> items) {
    return transaction(namespace, transactionId, items, chunk, null);
  }

  /** {@link #transaction(String, String, List, int, Duration)} with the default deadline. */
  public WriteResult transaction(String namespace, String transactionId, List<Item> items,
      int chunk) {
    return transaction(namespace, transactionId, items, chunk, null);
  }

  /**
   * A two-phase write: stages the items (numbered 0 to n-1 in order) {@code chunk} at a time,
   * then commits them; all are applied, in order, once the commit is TRUE. Calling it again
   * with the same transaction id and items after any failure completes it, applied once.
   *
   * <p>One deadline covers the appends and the commit. An append refused as the transaction is
   * already committed goes on to the commit, which answers TRUE again: so a caller that lost the
   * commit's answer resumes with the same call.
   *
   * @return the commit's result: TRUE, or UNKNOWN when the deadline ended while the commit was
   *     retried (it is committed, and the producers queue its marker); FALSE when the deadline
   *     ended before the commit was sent (nothing committed, nothing will be applied)
   * @throws RefusedException for a refusal (an aborted or expired transaction...), and
   *     RESOURCE_EXHAUSTED when the producer shed the appends until the deadline
   */
  public WriteResult transaction(String namespace, String transactionId, List<Item> items,
      int chunk, Duration deadline) {
    if (chunk < 1) {
      throw new IllegalArgumentException("a chunk holds at least one item");
    }
    begin();
    return await(track(twoPhase.run(namespace, transactionId, List.copyOf(items), chunk,
        deadline(deadline))));
  }

  /** Commits a transaction of {@code itemCount} staged items, with the default deadline. */
  public WriteResult commit(String namespace, String transactionId, long itemCount) {
    return commit(namespace, transactionId, itemCount, null);
  }

  /** Commits a transaction of {@code itemCount} staged items, retried until TRUE or deadline. */
  public WriteResult commit(String namespace, String transactionId, long itemCount,
      Duration deadline) {
    begin();
    return await(track(twoPhase.commit(namespace, transactionId, itemCount, deadline(deadline))));
  }

  /** Drops a transaction that is not committed, with the default deadline. */
  public AbortResult abort(String namespace, String transactionId) {
    return abort(namespace, transactionId, null);
  }

  /**
   * Drops a transaction that is not committed (an unknown or already aborted one too).
   *
   * @throws RefusedException FAILED_PRECONDITION for a committed transaction
   * @throws NoAnswerException when no producer answered by the deadline
   */
  public AbortResult abort(String namespace, String transactionId, Duration deadline) {
    begin();
    CompletableFuture<AbortResult> aborted =
        twoPhase.abort(namespace, transactionId, deadline(deadline));
    aborted.whenComplete((r, e) -> end());
    return await(aborted);
  }

  /**
   * Sends what is batched, waits for every call under way to end (each by its deadline), then
   * closes the connections.
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    batcher.close();
    synchronized (outstanding) {
      while (outstanding.get() > 0) {
        try {
          outstanding.wait(100);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
    runtime.timer().shutdownNow();
    for (Endpoint e : runtime.pool().endpoints()) {
      e.channel.shutdown();
    }
    for (Endpoint e : runtime.pool().endpoints()) {
      try {
        if (!e.channel.awaitTermination(5, TimeUnit.SECONDS)) {
          e.channel.shutdownNow();
        }
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
        e.channel.shutdownNow();
      }
    }
  }

  private long deadline(Duration given) {
    Duration d = given != null ? given : defaultDeadline;
    return runtime.clock().getAsLong() + d.toNanos();
  }

  private void begin() {
    if (closed) {
      throw new IllegalStateException("the client is closed");
    }
    outstanding.incrementAndGet();
  }

  private void end() {
    if (outstanding.decrementAndGet() == 0) {
      synchronized (outstanding) {
        outstanding.notifyAll();
      }
    }
  }

  /** Counts the call down when it ends, and tells the listener how it ended. */
  private CompletableFuture<WriteResult> track(CompletableFuture<WriteResult> call) {
    return call.whenComplete((r, e) -> {
      end();
      if (listener == null) {
        return;
      }
      if (r != null) {
        listener.onResult(r.outcome().name(), r.attempts());
      } else if (unwrap(e) instanceof RefusedException refused) {
        listener.onResult("REFUSED", refused.attempts());
      }
    });
  }

  private static <T> T await(CompletableFuture<T> call) {
    try {
      return call.join();
    } catch (CompletionException e) {
      Throwable cause = unwrap(e);
      if (cause instanceof RuntimeException runtime) {
        throw runtime;
      }
      throw e;
    }
  }

  private static Throwable unwrap(Throwable e) {
    while (e instanceof CompletionException && e.getCause() != null) {
      e = e.getCause();
    }
    return e;
  }

  /** Settings of a {@link WalClient}; the defaults are those of every WAL client library. */
  public static final class Builder {
    private List<String> producers = List.of();
    private Duration deadline = Duration.ofSeconds(10);
    private Duration backoff = Duration.ofMillis(50);
    private Duration maxBackoff = Duration.ofSeconds(2);
    private boolean batching = true;
    private Duration linger = Duration.ofMillis(1);
    private int maxBatchWrites = 500;
    private long maxBatchBytes = 1024 * 1024;
    private int batchesInFlight = 1;
    private Duration pause = Duration.ofSeconds(1);
    private Duration maxPause = Duration.ofSeconds(30);
    private int chunk = 100;
    private Tls tls;
    private ResultListener listener;

    private Builder() {}

    /** The producers' addresses ("host:port"), each call sent to the next one in turn. */
    public Builder producers(List<String> addresses) {
      this.producers = List.copyOf(addresses);
      return this;
    }

    /** The deadline of a call that names none (10 s). */
    public Builder deadline(Duration deadline) {
      this.deadline = positive(deadline, "deadline");
      return this;
    }

    /** The backoff between retries: from {@code initial} (50 ms), doubling up to {@code max}
     *  (2 s), with full jitter. */
    public Builder backoff(Duration initial, Duration max) {
      this.backoff = positive(initial, "backoff");
      this.maxBackoff = positive(max, "max backoff");
      return this;
    }

    /** Whether concurrent writes share {@code WriteToLogBatch} calls (on). */
    public Builder batching(boolean on) {
      this.batching = on;
      return this;
    }

    /** How long a batch's first write waits for others (1 ms). */
    public Builder linger(Duration linger) {
      this.linger = Objects.requireNonNull(linger, "linger");
      return this;
    }

    /** The most writes of one batch (500; the producer takes 1000 at most). */
    public Builder maxBatchWrites(int writes) {
      if (writes < 1 || writes > 1000) {
        throw new IllegalArgumentException("a batch holds 1 to 1000 writes");
      }
      this.maxBatchWrites = writes;
      return this;
    }

    /** The most request bytes of one batch (1 MiB); a larger write is sent alone. */
    public Builder maxBatchBytes(long bytes) {
      this.maxBatchBytes = bytes;
      return this;
    }

    /** How many batches may be out at once (1, which keeps writes of one key in order). */
    public Builder batchesInFlight(int batches) {
      if (batches < 1) {
        throw new IllegalArgumentException("at least one batch in flight");
      }
      this.batchesInFlight = batches;
      return this;
    }

    /** How long a producer that failed in transport is skipped: from {@code initial} (1 s),
     *  doubling up to {@code max} (30 s) while it keeps failing. */
    public Builder producerPause(Duration initial, Duration max) {
      this.pause = positive(initial, "pause");
      this.maxPause = positive(max, "max pause");
      return this;
    }

    /** Items per AppendItems call of the two-phase helper (100). */
    public Builder transactionChunk(int items) {
      if (items < 1) {
        throw new IllegalArgumentException("a chunk holds at least one item");
      }
      this.chunk = items;
      return this;
    }

    /** TLS (mTLS with a client certificate) to every producer; plaintext when unset. */
    public Builder tls(Tls tls) {
      this.tls = tls;
      return this;
    }

    /** Told of every write's and commit's result, for metrics (none by default). */
    public Builder listener(ResultListener listener) {
      this.listener = listener;
      return this;
    }

    public WalClient build() {
      if (producers.isEmpty()) {
        throw new IllegalArgumentException("a client needs at least one producer address");
      }
      List<Endpoint> endpoints = new ArrayList<>();
      for (String address : producers) {
        endpoints.add(Endpoint.open(address, tls));
      }
      return new WalClient(this, endpoints);
    }

    /** A client over channels made elsewhere (tests: in-process producers). */
    WalClient build(List<Endpoint> endpoints) {
      return new WalClient(this, endpoints);
    }

    private static Duration positive(Duration d, String what) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(what + " must be positive");
      }
      return d;
    }
  }
}
