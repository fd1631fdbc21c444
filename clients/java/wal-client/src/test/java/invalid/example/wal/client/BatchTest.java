package invalid.example.wal.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import invalid.example.wal.v1.DestinationOutcome;
import invalid.example.wal.v1.DestinationState;
import invalid.example.wal.v1.Trilean;
import invalid.example.wal.v1.WriteToLogRequest;
import invalid.example.wal.v1.WriteToLogResponse;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Concurrent writes through the batcher, against an in-process producer. */
class BatchTest {
  private final FakeProducer producer;
  private final WalClient client;

  BatchTest() throws Exception {
    producer = new FakeProducer();
    client = WalClient.builder().producers(List.of("unused")).maxBatchWrites(50)
        .build(List.of(producer.endpoint()));
  }

  @AfterEach
  void close() {
    client.close();
    producer.close();
  }

  @Test
  void eachWriteOfABatchIsAnsweredOnItsOwn() {
    Set<String> unknownOnce = new HashSet<>();
    producer.answer = w -> {
      String p = w.getPayload().toStringUtf8();
      if (p.isEmpty()) {
        return FakeProducer.refused(Status.Code.INVALID_ARGUMENT, "payload", "empty");
      }
      if (p.startsWith("u") && unknownOnce.add(w.getIdempotencyId())) {
        return Trilean.TRILEAN_UNKNOWN;
      }
      return p.startsWith("f") ? Trilean.TRILEAN_FALSE : Trilean.TRILEAN_TRUE;
    };
    List<String> payloads = List.of("t0", "", "u2", "f3", "t4");
    List<CompletableFuture<WriteResult>> results = new ArrayList<>();
    for (String p : payloads) {
      results.add(client.writeAsync(Write.builder("ns", p).key("k").build()));
    }
    assertEquals(Outcome.TRUE, results.get(0).join().outcome());
    var refused = (RefusedException) assertThrows(results.get(1));
    assertEquals("payload", refused.field());
    assertEquals(1, refused.attempts());
    WriteResult unknown = results.get(2).join();
    assertEquals(Outcome.TRUE, unknown.outcome());
    assertEquals(2, unknown.attempts());
    assertEquals(Outcome.FALSE, results.get(3).join().outcome());
    assertEquals(1, results.get(3).join().attempts());
    assertEquals(Outcome.TRUE, results.get(4).join().outcome());
    // Only the UNKNOWN write was sent again, in a later batch, with its id.
    assertEquals(6, producer.writes.size());
    WriteToLogRequest retried = producer.writes.get(5);
    assertEquals("u2", retried.getPayload().toStringUtf8());
    assertEquals(unknown.entryId(), retried.getIdempotencyId());
    assertTrue(producer.batches.size() >= 2);
  }

  @Test
  void writesAreBatchedUpToTheCapAndSentInTheOrderMade() {
    List<CompletableFuture<WriteResult>> results = new ArrayList<>();
    for (int i = 0; i < 120; i++) {
      results.add(client.writeAsync(Write.builder("ns", "w" + i).key("k" + i % 3).build()));
    }
    results.forEach(r -> assertEquals(Outcome.TRUE, r.join().outcome()));
    assertTrue(producer.batches.size() < 120, "batched: " + producer.batches.size() + " calls");
    producer.batches.forEach(b -> assertTrue(b.getWritesCount() <= 50));
    for (int i = 0; i < 120; i++) {
      assertEquals("w" + i, producer.writes.get(i).getPayload().toStringUtf8());
    }
  }

  @Test
  void aBatchCarriesTheTraceContextOfItsFirstWrite() {
    String tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    client.writeAsync(Write.builder("ns", "a").traceparent(tp).build()).join();
    assertEquals(List.of(tp), producer.traceparents);
  }

  private static Throwable assertThrows(CompletableFuture<?> future) {
    try {
      future.join();
    } catch (CompletionException e) {
      return e.getCause();
    }
    throw new AssertionError("expected the write to fail");
  }

  @Test
  void aWriteAwaitingItsDestinationsGoesAloneAndHearsEach() {
    producer.answer = w -> w.getAwaitDestinationsMillis() == 0 ? Trilean.TRILEAN_TRUE
        : WriteToLogResponse.newBuilder().setDurable(Trilean.TRILEAN_TRUE)
            .setEntryId(w.getIdempotencyId())
            .addDestinations(outcome("default", DestinationState.DESTINATION_STATE_APPLIED))
            .addDestinations(outcome("cache", DestinationState.DESTINATION_STATE_PENDING))
            .addDestinations(outcome("hook", DestinationState.DESTINATION_STATE_DEAD_LETTERED))
            .build();
    WriteResult r = client.write(Write.builder("ns", "p")
        .awaitDestinations(java.time.Duration.ofMillis(2500)).build());
    assertEquals(Outcome.TRUE, r.outcome());
    assertEquals(java.util.Map.of("default", "applied", "cache", "pending",
        "hook", "dead_lettered"), r.destinations());
    // Its own WriteToLog, though the client batches: in a batch it would hold the others back.
    assertEquals(0, producer.batches.size());
    assertEquals(2500, producer.writes.get(0).getAwaitDestinationsMillis());
    // A write that does not wait hears of no destination.
    assertTrue(client.write(Write.builder("ns", "q").build()).destinations().isEmpty());
  }

  private static DestinationOutcome outcome(String name, DestinationState state) {
    return DestinationOutcome.newBuilder().setDestination(name).setState(state).build();
  }
}
