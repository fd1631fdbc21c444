package invalid.example.wal.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import invalid.example.wal.v1.AppendItemsResponse;
import invalid.example.wal.v1.Trilean;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The two-phase helper against an in-process producer. */
class TransactionTest {
  private final FakeProducer producer;
  private final WalClient client;

  TransactionTest() throws Exception {
    producer = new FakeProducer();
    client = WalClient.builder().producers(List.of("unused")).build(List.of(producer.endpoint()));
  }

  @AfterEach
  void close() {
    client.close();
    producer.close();
  }

  private static List<Item> items(int n) {
    List<Item> items = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      items.add(Item.of("item-" + i));
    }
    return items;
  }

  @Test
  void itemsAreStagedInChunksNumberedInOrderThenCommitted() {
    WriteResult r = client.transaction("ns", "t-1", items(25), 10);
    assertEquals(Outcome.TRUE, r.outcome());
    assertEquals("marker-t-1", r.entryId());
    assertEquals(List.of(10, 10, 5),
        producer.appends.stream().map(a -> a.getItemsCount()).toList());
    assertEquals(20, producer.appends.get(2).getItems(0).getSequence());
    assertEquals("item-24", producer.appends.get(2).getItems(4).getPayload().toStringUtf8());
    assertEquals(25, producer.commits.get(0).getItemCount());
  }

  @Test
  void aFailedAppendIsSentAgainIdentically() {
    var calls = new AtomicInteger();
    producer.appendAnswer = a -> calls.incrementAndGet() == 2
        ? Status.UNAVAILABLE.withDescription("staging failed").asRuntimeException()
        : AppendItemsResponse.newBuilder().setStaged(a.getItemsCount()).build();
    assertEquals(Outcome.TRUE, client.transaction("ns", "t-2", items(30), 10).outcome());
    assertEquals(4, producer.appends.size());
    assertEquals(producer.appends.get(1), producer.appends.get(2));
  }

  @Test
  void aCommitAnsweredUnknownIsSentAgain() {
    var calls = new AtomicInteger();
    producer.commitAnswer = c -> calls.incrementAndGet() == 1 ? Trilean.TRILEAN_UNKNOWN
        : Trilean.TRILEAN_TRUE;
    WriteResult r = client.transaction("ns", "t-3", items(3), 10);
    assertEquals(Outcome.TRUE, r.outcome());
    assertEquals(2, r.attempts());
  }

  @Test
  void aRefusedCommitIsTyped() {
    producer.commitAnswer = c -> FakeProducer.refused(Status.Code.FAILED_PRECONDITION,
        "transaction_id", "aborted");
    var e = assertThrows(RefusedException.class, () -> client.commit("ns", "t-4", 1));
    assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
    assertEquals("transaction_id", e.field());
    assertEquals(1, e.attempts());
  }

  @Test
  void anAbortAnswers() {
    assertEquals(1, client.abort("ns", "t-5").attempts());
  }

  @Test
  void anAppendRefusedAsCommittedGoesOnToTheCommit() {
    producer.appendAnswer = a -> FakeProducer.refused(Status.Code.FAILED_PRECONDITION,
        "transaction_id", "already committed");
    WriteResult r = client.transaction("ns", "t-6", items(25), 10);
    assertEquals(Outcome.TRUE, r.outcome());
    assertEquals(1, producer.appends.size());
    assertEquals(25, producer.commits.get(0).getItemCount());
  }

  @Test
  void aDeadlineEndingBeforeTheCommitIsFalse() {
    producer.appendAnswer = a -> Status.UNAVAILABLE.withDescription("down").asRuntimeException();
    WriteResult r = client.transaction("ns", "t-7", items(5), 10, Duration.ofMillis(300));
    assertEquals(Outcome.FALSE, r.outcome());
    assertTrue(r.attempts() >= 2, "attempts " + r.attempts());
    assertEquals(0, producer.commits.size());
  }

  @Test
  void otherAppendRefusalsAreTyped() {
    producer.appendAnswer = a -> FakeProducer.refused(Status.Code.ALREADY_EXISTS, "items",
        "a different item under sequence 3");
    var e = assertThrows(RefusedException.class,
        () -> client.transaction("ns", "t-8", items(5), 10));
    assertEquals(Status.Code.ALREADY_EXISTS, e.code());
    assertEquals(0, producer.commits.size());
  }
}
