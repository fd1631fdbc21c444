package invalid.example.wal.client;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * One mutation to hand to a namespace's write-ahead log. Built with {@link #builder}; only the
 * namespace and the payload are required. Nothing here is checked locally: the producer is the
 * one judge of a request, so a library answers exactly as it would.
 */
public final class Write {
  private final String namespace;
  private final byte[] payload;
  private final String key;
  private final String idempotencyId;
  private final long delayMillis;
  private final long jitterMillis;
  private final long originalWriteTimeMicros;
  private final Target target;
  private final Duration deadline;
  private final String traceparent;
  private final String tracestate;
  private final Boolean batch;
  private final long awaitDestinationsMillis;

  private Write(Builder b) {
    namespace = b.namespace;
    payload = b.payload;
    key = b.key;
    idempotencyId = b.idempotencyId;
    delayMillis = b.delayMillis;
    jitterMillis = b.jitterMillis;
    originalWriteTimeMicros = b.originalWriteTimeMicros;
    target = b.target;
    deadline = b.deadline;
    traceparent = b.traceparent;
    tracestate = b.tracestate;
    batch = b.batch;
    awaitDestinationsMillis = b.awaitDestinationsMillis;
  }

  public static Builder builder(String namespace, byte[] payload) {
    return new Builder(namespace, payload);
  }

  /** A write of the text's UTF-8 bytes. */
  public static Builder builder(String namespace, String payload) {
    return new Builder(namespace, payload.getBytes(StandardCharsets.UTF_8));
  }

  public String namespace() {
    return namespace;
  }

  /** The caller's idempotency id, or null: the library then makes a UUIDv7 before sending. */
  public String idempotencyId() {
    return idempotencyId;
  }

  /** The write's own deadline, or null for the client's default. */
  public Duration deadline() {
    return deadline;
  }

  String traceparent() {
    return traceparent;
  }

  String tracestate() {
    return tracestate;
  }

  /** Whether this write may share a batch call: null leaves it to the client's setting. */
  Boolean batch() {
    return batch;
  }

  /** How long the producer waits for the destinations once stored; 0: not at all. */
  long awaitDestinationsMillis() {
    return awaitDestinationsMillis;
  }

  /** The request, with the id the library chose when the caller gave none. */
  invalid.example.wal.v1.WriteToLogRequest toRequest(String id) {
    var request = invalid.example.wal.v1.WriteToLogRequest.newBuilder()
        .setNamespace(namespace)
        .setPayload(com.google.protobuf.ByteString.copyFrom(payload))
        .setIdempotencyId(id);
    if (key != null) {
      request.setKey(key);
    }
    if (delayMillis != 0 || jitterMillis != 0 || originalWriteTimeMicros != 0) {
      request.setLifecycle(invalid.example.wal.v1.Lifecycle.newBuilder()
          .setDelayMillis(delayMillis)
          .setJitterMillis(jitterMillis)
          .setOriginalWriteTimeMicros(originalWriteTimeMicros));
    }
    if (target != null) {
      request.setTarget(target.toProto());
    }
    // Sent as given: the producer refuses what is out of range, naming the field.
    request.setAwaitDestinationsMillis((int) Math.min(awaitDestinationsMillis, 0xFFFF_FFFFL));
    return request.build();
  }

  /** Builds a {@link Write}. */
  public static final class Builder {
    private final String namespace;
    private final byte[] payload;
    private String key;
    private String idempotencyId;
    private long delayMillis;
    private long jitterMillis;
    private long originalWriteTimeMicros;
    private Target target;
    private Duration deadline;
    private String traceparent;
    private String tracestate;
    private Boolean batch;
    private long awaitDestinationsMillis;

    private Builder(String namespace, byte[] payload) {
      this.namespace = Objects.requireNonNull(namespace, "namespace");
      this.payload = Objects.requireNonNull(payload, "payload").clone();
    }

    /** The partition key: writes of one key keep their order on the queue. */
    public Builder key(String key) {
      this.key = key;
      return this;
    }

    /** The idempotency id: every attempt carries it, and targets apply it once. */
    public Builder idempotencyId(String id) {
      this.idempotencyId = id;
      return this;
    }

    /** Deliver no earlier than this after the original write time (the namespace caps it). */
    public Builder delay(Duration delay) {
      return delayMillis(delay.toMillis());
    }

    /** As {@link #delay(Duration)}, in milliseconds, sent as given (negative is refused). */
    public Builder delayMillis(long millis) {
      this.delayMillis = millis;
      return this;
    }

    /** A window whose random share is added to the delay; zero: the namespace's default. */
    public Builder jitter(Duration jitter) {
      this.jitterMillis = jitter.toMillis();
      return this;
    }

    /** When the mutation happened (CQL targets write with it as their timestamp). */
    public Builder originalWriteTime(Instant time) {
      this.originalWriteTimeMicros =
          Math.addExact(Math.multiplyExact(time.getEpochSecond(), 1_000_000L), time.getNano() / 1000);
      return this;
    }

    /** Where to deliver it; unset: the namespace's default target. */
    public Builder target(Target target) {
      this.target = target;
      return this;
    }

    /** How long the library may take, retries included; unset: the client's default (10 s). */
    public Builder deadline(Duration deadline) {
      this.deadline = deadline;
      return this;
    }

    /** The caller's W3C trace context, sent as gRPC metadata so the entry joins the trace. */
    public Builder traceparent(String traceparent) {
      this.traceparent = traceparent;
      return this;
    }

    public Builder tracestate(String tracestate) {
      this.tracestate = tracestate;
      return this;
    }

    /**
     * Whether this write may share a {@code WriteToLogBatch} call with concurrent ones (default:
     * the client's batching setting); false sends it as its own {@code WriteToLog}.
     */
    public Builder batch(boolean batch) {
      this.batch = batch;
      return this;
    }

    /**
     * Once the entry is stored, the producer waits up to this long (60 s at most, never past the
     * call's deadline) for the namespace's destinations to apply it, and {@link
     * WriteResult#destinations()} says what each had done. Such a write is sent as its own
     * {@code WriteToLog}: in a batch it would hold the others back.
     */
    public Builder awaitDestinations(Duration wait) {
      if (wait.isNegative()) {
        throw new IllegalArgumentException("awaitDestinations is negative: " + wait);
      }
      this.awaitDestinationsMillis = wait.toMillis();
      return this;
    }

    public Write build() {
      return new Write(this);
    }
  }
}
