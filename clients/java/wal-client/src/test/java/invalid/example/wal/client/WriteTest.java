package invalid.example.wal.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import invalid.example.wal.v1.Trilean;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Single writes (their own WriteToLog) against an in-process producer. */
class WriteTest {
  private final FakeProducer producer;
  private final WalClient client;

  WriteTest() throws Exception {
    producer = new FakeProducer();
    client = WalClient.builder().batching(false).producers(List.of("unused"))
        .build(List.of(producer.endpoint()));
  }

  @AfterEach
  void close() {
    client.close();
    producer.close();
  }

  private static Write write(String payload) {
    return Write.builder("ns", payload).key("k").build();
  }

  @Test
  void unknownIsRetriedWithTheSameIdUntilTrue() {
    var calls = new AtomicInteger();
    producer.answer = w -> calls.incrementAndGet() == 1 ? Trilean.TRILEAN_UNKNOWN
        : Trilean.TRILEAN_TRUE;
    WriteResult r = client.write(write("p"));
    assertEquals(Outcome.TRUE, r.outcome());
    assertEquals(2, r.attempts());
    assertEquals(2, producer.writes.size());
    String id = producer.writes.get(0).getIdempotencyId();
    assertEquals(7, java.util.UUID.fromString(id).version(), "the library made a UUIDv7");
    assertEquals(id, producer.writes.get(1).getIdempotencyId());
    assertEquals(id, r.entryId());
  }

  @Test
  void theCallersIdIsSentAsGiven() {
    WriteResult r = client.write(Write.builder("ns", "p").idempotencyId("mine").build());
    assertEquals("mine", producer.writes.get(0).getIdempotencyId());
    assertEquals("mine", r.entryId());
  }

  @Test
  void falseIsReturnedAtOnceAndNotRetried() {
    producer.answer = w -> Trilean.TRILEAN_FALSE;
    WriteResult r = client.write(write("p"));
    assertEquals(Outcome.FALSE, r.outcome());
    assertEquals(1, r.attempts());
    assertEquals(1, producer.writes.size());
    assertTrue(!r.message().isEmpty());
  }

  @Test
  void aRefusalIsTypedNamesTheFieldAndIsNotRetried() {
    producer.answer = w -> FakeProducer.refused(Status.Code.INVALID_ARGUMENT, "payload", "empty");
    var e = assertThrows(RefusedException.class, () -> client.write(write("")));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    assertEquals("payload", e.field());
    assertEquals(1, e.attempts());
    assertEquals(1, producer.writes.size());
  }

  @Test
  void aShedWriteWaitsWhatRetryInfoAsks() {
    var calls = new AtomicInteger();
    producer.answer = w -> calls.incrementAndGet() == 1 ? FakeProducer.shed(150)
        : Trilean.TRILEAN_TRUE;
    long start = System.nanoTime();
    WriteResult r = client.write(write("p"));
    long elapsed = (System.nanoTime() - start) / 1_000_000;
    assertEquals(Outcome.TRUE, r.outcome());
    assertEquals(2, r.attempts());
    assertTrue(elapsed >= 150 && elapsed < 1500, "waited " + elapsed + " ms");
  }

  @Test
  void aWriteShedUntilItsDeadlineIsRefusedWithResourceExhausted() {
    producer.answer = w -> FakeProducer.shed(100);
    var e = assertThrows(RefusedException.class, () -> client.write(
        Write.builder("ns", "p").deadline(Duration.ofMillis(500)).build()));
    assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.code());
    assertTrue(e.attempts() >= 2);
  }

  @Test
  void aWriteThatStaysUnknownReturnsUnknownByItsDeadline() {
    producer.answer = w -> Trilean.TRILEAN_UNKNOWN;
    long start = System.nanoTime();
    WriteResult r = client.write(Write.builder("ns", "p").deadline(Duration.ofMillis(700))
        .build());
    long elapsed = (System.nanoTime() - start) / 1_000_000;
    assertEquals(Outcome.UNKNOWN, r.outcome());
    assertTrue(r.attempts() >= 2, "attempts " + r.attempts());
    // By the deadline, plus the time to notice (BEHAVIOUR.md allows a second).
    assertTrue(elapsed >= 650 && elapsed < 1700, "returned after " + elapsed + " ms");
    String id = producer.writes.get(0).getIdempotencyId();
    assertTrue(producer.writes.stream().allMatch(w -> w.getIdempotencyId().equals(id)));
  }

  @Test
  void theTraceContextTravelsAsMetadata() {
    String tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    client.write(Write.builder("ns", "p").traceparent(tp).build());
    assertEquals(List.of(tp), producer.traceparents);
  }
}
