package invalid.example.wal.client;

import io.grpc.Status;

/**
 * The producer refused the request, and nothing was stored: never retried by the library.
 *
 * <p>Also thrown with {@code RESOURCE_EXHAUSTED} when the deadline ended while every attempt was
 * shed by the producer's limits.
 */
public final class RefusedException extends WalException {
  private final String field;

  RefusedException(Status.Code code, String field, String message, int attempts) {
    super(code, message, attempts);
    this.field = field == null ? "" : field;
  }

  /**
   * The request field the refusal is about ({@code namespace}, {@code payload}, {@code
   * lifecycle.delay_millis}, {@code transaction_id}...), or empty when it names none.
   */
  public String field() {
    return field;
  }

  @Override
  public String toString() {
    return "RefusedException{" + code() + (field.isEmpty() ? "" : " " + field) + ": "
        + getMessage() + "}";
  }
}
