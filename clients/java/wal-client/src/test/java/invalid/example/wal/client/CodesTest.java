package invalid.example.wal.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.google.protobuf.Any;
import com.google.rpc.BadRequest;
import com.google.rpc.RetryInfo;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.util.EnumSet;
import org.junit.jupiter.api.Test;

class CodesTest {
  @Test
  void transportFailuresAreRetried() {
    for (Status.Code code : EnumSet.of(Status.Code.UNAVAILABLE, Status.Code.DEADLINE_EXCEEDED,
        Status.Code.CANCELLED, Status.Code.INTERNAL, Status.Code.UNKNOWN, Status.Code.ABORTED,
        Status.Code.DATA_LOSS)) {
      assertEquals(Codes.Kind.TRANSPORT, Codes.kind(code), code.name());
    }
  }

  @Test
  void resourceExhaustedIsWaitedFor() {
    assertEquals(Codes.Kind.SHED, Codes.kind(Status.Code.RESOURCE_EXHAUSTED));
  }

  @Test
  void refusalsAreNeverRetried() {
    for (Status.Code code : EnumSet.of(Status.Code.INVALID_ARGUMENT, Status.Code.NOT_FOUND,
        Status.Code.PERMISSION_DENIED, Status.Code.UNAUTHENTICATED,
        Status.Code.FAILED_PRECONDITION, Status.Code.ALREADY_EXISTS, Status.Code.OUT_OF_RANGE,
        Status.Code.UNIMPLEMENTED)) {
      assertEquals(Codes.Kind.REFUSED, Codes.kind(code), code.name());
    }
  }

  @Test
  void theFieldComesFromTheBadRequestDetail() {
    var bad = BadRequest.newBuilder().addFieldViolations(
        BadRequest.FieldViolation.newBuilder().setField("lifecycle.delay_millis")
            .setDescription("negative"));
    var status = com.google.rpc.Status.newBuilder()
        .setCode(Status.Code.INVALID_ARGUMENT.value())
        .setMessage("negative delay")
        .addDetails(Any.pack(bad.build()))
        .build();
    assertEquals("lifecycle.delay_millis",
        Codes.field(StatusProto.toStatusRuntimeException(status)));
    assertEquals("", Codes.field(Status.INVALID_ARGUMENT.asRuntimeException()));
  }

  @Test
  void theWaitComesFromTheRetryInfoDetail() {
    var info = RetryInfo.newBuilder().setRetryDelay(
        com.google.protobuf.Duration.newBuilder().setSeconds(1).setNanos(250_000_000));
    var status = com.google.rpc.Status.newBuilder()
        .setCode(Status.Code.RESOURCE_EXHAUSTED.value())
        .addDetails(Any.pack(info.build()))
        .build();
    assertEquals(1_250_000_000L,
        Codes.retryDelayNanos(StatusProto.toStatusRuntimeException(status)));
    assertEquals(-1, Codes.retryDelayNanos(Status.RESOURCE_EXHAUSTED.asRuntimeException()));
  }
}
