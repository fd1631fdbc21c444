package invalid.example.wal.client;

import io.grpc.Status;

/**
 * What one call has learnt over its attempts, so that the answer at the deadline is what is
 * known: UNKNOWN if any attempt may have stored it, RESOURCE_EXHAUSTED if every one was shed.
 */
final class Progress {
  int attempts;
  int retries;
  boolean mayHaveStored;
  boolean shed;
  Status.Code lastCode = Status.Code.OK;
  String lastMessage = "";

  /** An answer of UNKNOWN (or TRILEAN_UNSPECIFIED): the entry may be stored. */
  void unknown(String message) {
    mayHaveStored = true;
    lastCode = Status.Code.OK;
    lastMessage = message;
  }

  /** A transport failure: the request may have reached the broker. */
  void transport(Status.Code code, String message) {
    mayHaveStored = true;
    lastCode = code;
    lastMessage = message;
  }

  void shed(String message) {
    shed = true;
    lastCode = Status.Code.RESOURCE_EXHAUSTED;
    lastMessage = message;
  }

  /** The write's result when no attempt may start before its deadline. */
  WriteResult writeAtDeadline(String id) {
    if (mayHaveStored) {
      return new WriteResult(Outcome.UNKNOWN, id, attempts, lastMessage);
    }
    if (shed) {
      throw new RefusedException(Status.Code.RESOURCE_EXHAUSTED, "", lastMessage, attempts);
    }
    // Only when the deadline ended before the first attempt: nothing was sent.
    return new WriteResult(Outcome.FALSE, id, attempts,
        "the deadline ended before the write could be sent");
  }

  /** The failure of a call with no Trilean (an append, an abort) at its deadline. */
  WalException callAtDeadline() {
    if (!mayHaveStored && shed) {
      return new RefusedException(Status.Code.RESOURCE_EXHAUSTED, "", lastMessage, attempts);
    }
    Status.Code code = lastCode == Status.Code.OK ? Status.Code.DEADLINE_EXCEEDED : lastCode;
    String message = attempts == 0 ? "the deadline ended before the call could be sent"
        : "no answer by the deadline: " + lastMessage;
    return new NoAnswerException(code, message, attempts);
  }
}
