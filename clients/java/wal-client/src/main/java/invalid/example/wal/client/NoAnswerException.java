package invalid.example.wal.client;

import io.grpc.Status;

/**
 * An abort that got no answer by its deadline: every attempt failed in transport, so what it did
 * is unknown. Calling again with the same arguments is safe.
 */
public final class NoAnswerException extends WalException {
  NoAnswerException(Status.Code code, String message, int attempts) {
    super(code, message, attempts);
  }
}
