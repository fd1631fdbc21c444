package invalid.example.wal.client;

import com.google.rpc.BadRequest;
import com.google.rpc.RetryInfo;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;

/** What a gRPC status means for a call: retried, waited for, or a refusal; and its details. */
final class Codes {
  /** How the library treats a status code. */
  enum Kind {
    /** The call failed without an answer: it may have been stored; retried, maybe elsewhere. */
    TRANSPORT,
    /** Over a limit, nothing stored: retried after the wait the producer asks for. */
    SHED,
    /** The request is wrong or not allowed, nothing stored: a typed error, never retried. */
    REFUSED
  }

  private Codes() {}

  static Kind kind(Status.Code code) {
    return switch (code) {
      case INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION,
          ALREADY_EXISTS, OUT_OF_RANGE, UNIMPLEMENTED -> Kind.REFUSED;
      case RESOURCE_EXHAUSTED -> Kind.SHED;
      // UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, INTERNAL, UNKNOWN, and every other code
      // (ABORTED, DATA_LOSS...): the call may have reached the broker.
      default -> Kind.TRANSPORT;
    };
  }

  /** The field the status's google.rpc.BadRequest detail names, or empty. */
  static String field(Throwable error) {
    com.google.rpc.Status status = StatusProto.fromThrowable(error);
    if (status == null) {
      return "";
    }
    for (var detail : status.getDetailsList()) {
      if (detail.is(BadRequest.class)) {
        try {
          BadRequest bad = detail.unpack(BadRequest.class);
          if (bad.getFieldViolationsCount() > 0) {
            return bad.getFieldViolations(0).getField();
          }
        } catch (com.google.protobuf.InvalidProtocolBufferException e) {
          return "";
        }
      }
    }
    return "";
  }

  /** The wait the status's google.rpc.RetryInfo detail asks for, in nanoseconds, or -1. */
  static long retryDelayNanos(Throwable error) {
    com.google.rpc.Status status = StatusProto.fromThrowable(error);
    if (status == null) {
      return -1;
    }
    for (var detail : status.getDetailsList()) {
      if (detail.is(RetryInfo.class)) {
        try {
          var delay = detail.unpack(RetryInfo.class).getRetryDelay();
          long nanos = delay.getSeconds() * 1_000_000_000L + delay.getNanos();
          return nanos > 0 ? nanos : -1;
        } catch (com.google.protobuf.InvalidProtocolBufferException e) {
          return -1;
        }
      }
    }
    return -1;
  }

  /** The status's message, or its code's name when it has none. */
  static String message(Status status) {
    String description = status.getDescription();
    if (description != null && !description.isEmpty()) {
      return description;
    }
    return status.getCause() != null ? status.getCode() + ": " + status.getCause()
        : status.getCode().name();
  }
}
