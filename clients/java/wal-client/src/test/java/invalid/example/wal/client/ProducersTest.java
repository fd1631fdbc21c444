package invalid.example.wal.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.grpc.Status;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Several producers: a write that failed in transport is retried on another, with its id. */
class ProducersTest {
  @Test
  void aTransportFailureIsRetriedOnAnotherProducer() throws Exception {
    try (var gone = new FakeProducer(); var up = new FakeProducer()) {
      gone.down = Status.UNAVAILABLE.withDescription("connection refused");
      try (var client = WalClient.builder().batching(false).producers(List.of("unused"))
          .build(List.of(gone.endpoint(), up.endpoint()))) {
        for (int i = 0; i < 6; i++) {
          WriteResult r = client.write(Write.builder("ns", "p" + i).build());
          assertEquals(Outcome.TRUE, r.outcome(), "write " + i);
        }
        // The first write failed on `gone` and went to `up`; then `gone` is skipped (paused).
        assertEquals(6, up.writes.size());
      }
    }
  }
}
