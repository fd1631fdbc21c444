package invalid.example.wal.client;

import io.grpc.Status;

/** A call that ended without a durable answer: the gRPC code, the attempts made, the message. */
public class WalException extends RuntimeException {
  private final Status.Code code;
  private final int attempts;

  WalException(Status.Code code, String message, int attempts) {
    super(message);
    this.code = code;
    this.attempts = attempts;
  }

  /** The gRPC status code, e.g. {@code INVALID_ARGUMENT}. */
  public Status.Code code() {
    return code;
  }

  /** The attempts made before the library gave this answer (at least 1). */
  public int attempts() {
    return attempts;
  }
}
