package invalid.example.wal.conformance;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import invalid.example.wal.client.Item;
import invalid.example.wal.client.RefusedException;
import invalid.example.wal.client.WalClient;
import invalid.example.wal.client.WalException;
import invalid.example.wal.client.Write;
import invalid.example.wal.client.WriteResult;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * The conformance runner (clients/conformance/README.md): reads one plan on standard input, makes
 * its calls through the library's public API with one client of default settings, and prints one
 * result line per call on standard output as each ends. It checks nothing.
 */
public final class Runner {
  private final PrintStream out;
  private final WalClient client;

  private Runner(PrintStream out, WalClient client) {
    this.out = out;
    this.client = client;
  }

  public static void main(String[] args) throws Exception {
    JsonObject plan;
    try {
      plan = JsonParser.parseReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
          .getAsJsonObject();
    } catch (RuntimeException e) {
      System.err.println("runner: cannot read the plan: " + e);
      System.exit(2);
      return;
    }
    List<String> producers = new ArrayList<>();
    plan.getAsJsonArray("producers").forEach(p -> producers.add(p.getAsString()));
    // Result lines only on stdout, one per line, flushed as each is printed.
    var out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true,
        StandardCharsets.UTF_8);
    System.setOut(System.err);
    int status = 0;
    WalClient.Builder builder = WalClient.builder().producers(producers);
    if (plan.has("tls") && !plan.get("tls").isJsonNull()) {
      // The secured producer's mTLS files, for a case marked `secured`.
      var files = plan.getAsJsonObject("tls");
      var tls = invalid.example.wal.client.Tls.mutual(
          java.nio.file.Path.of(files.get("ca").getAsString()),
          java.nio.file.Path.of(files.get("certificate").getAsString()),
          java.nio.file.Path.of(files.get("key").getAsString()));
      if (files.has("domain")) {
        tls = tls.serverName(files.get("domain").getAsString());
      }
      builder.tls(tls);
    }
    try (WalClient client = builder.build()) {
      var runner = new Runner(out, client);
      JsonArray steps = plan.getAsJsonArray("steps");
      for (int i = 0; i < steps.size(); i++) {
        runner.step(i, steps.get(i).getAsJsonObject());
      }
    } catch (RuntimeException e) {
      System.err.println("runner: the library failed in a way the protocol cannot say: " + e);
      e.printStackTrace();
      status = 1;
    }
    out.flush();
    System.exit(status);
  }

  private void step(int step, JsonObject s) throws InterruptedException {
    String op = s.get("op").getAsString();
    String namespace = s.get("namespace").getAsString();
    // Without one, the library's default deadline.
    Duration deadline = present(s, "deadline_millis")
        ? Duration.ofMillis(s.get("deadline_millis").getAsLong()) : null;
    switch (op) {
      case "write" -> writes(step, s, namespace, deadline);
      case "transaction" -> {
        List<Item> items = new ArrayList<>();
        s.getAsJsonArray("items").forEach(
            item -> items.add(Item.of(item.getAsJsonObject().get("payload").getAsString())));
        String id = s.get("transaction_id").getAsString();
        int chunk = s.get("chunk").getAsInt();
        timed(step, 0, () -> client.transaction(namespace, id, items, chunk, deadline));
      }
      case "commit" -> {
        String id = s.get("transaction_id").getAsString();
        long count = s.get("item_count").getAsLong();
        timed(step, 0, () -> client.commit(namespace, id, count, deadline));
      }
      case "abort" -> {
        String id = s.get("transaction_id").getAsString();
        long start = System.nanoTime();
        JsonObject line;
        try {
          int attempts = client.abort(namespace, id, deadline).attempts();
          line = line(step, 0, "OK", start);
          line.addProperty("attempts", attempts);
        } catch (WalException e) {
          line = failure(step, 0, e, start);
        }
        print(line);
      }
      default -> throw new IllegalArgumentException("unknown op '" + op + "' in step " + step);
    }
  }

  private void writes(int step, JsonObject s, String namespace, Duration deadline)
      throws InterruptedException {
    boolean concurrent = s.get("concurrent").getAsBoolean();
    boolean batch = s.get("batch").getAsBoolean();
    long pace = s.has("pace_millis") ? s.get("pace_millis").getAsLong() : 0;
    JsonArray writes = s.getAsJsonArray("writes");
    if (concurrent) {
      List<CompletableFuture<?>> all = new ArrayList<>();
      for (int i = 0; i < writes.size(); i++) {
        int index = i;
        Write write = write(namespace, writes.get(i).getAsJsonObject(), deadline, batch);
        long start = System.nanoTime();
        all.add(client.writeAsync(write).handle((r, e) -> {
          print(r != null ? result(step, index, r, start) : failure(step, index, cause(e), start));
          return null;
        }));
      }
      CompletableFuture.allOf(all.toArray(CompletableFuture[]::new)).join();
      return;
    }
    for (int i = 0; i < writes.size(); i++) {
      if (i > 0 && pace > 0) {
        Thread.sleep(pace);
      }
      Write write = write(namespace, writes.get(i).getAsJsonObject(), deadline, batch);
      timed(step, i, () -> client.write(write));
    }
  }

  private static Write write(String namespace, JsonObject w, Duration deadline, boolean batch) {
    var builder = Write.builder(namespace, w.get("payload").getAsString()).batch(batch);
    if (deadline != null) {
      builder.deadline(deadline);
    }
    if (present(w, "key")) {
      builder.key(w.get("key").getAsString());
    }
    if (present(w, "idempotency_id")) {
      builder.idempotencyId(w.get("idempotency_id").getAsString());
    }
    if (present(w, "delay_millis")) {
      builder.delayMillis(w.get("delay_millis").getAsLong());
    }
    if (present(w, "await_destinations_millis")) {
      builder.awaitDestinations(
          java.time.Duration.ofMillis(w.get("await_destinations_millis").getAsLong()));
    }
    return builder.build();
  }

  private static boolean present(JsonObject o, String name) {
    JsonElement e = o.get(name);
    return e != null && !e.isJsonNull();
  }

  /** Runs one blocking call and prints its result line. */
  private void timed(int step, int index, java.util.function.Supplier<WriteResult> call) {
    long start = System.nanoTime();
    JsonObject line;
    try {
      line = result(step, index, call.get(), start);
    } catch (WalException e) {
      line = failure(step, index, e, start);
    }
    print(line);
  }

  private static JsonObject result(int step, int index, WriteResult r, long start) {
    JsonObject line = line(step, index, r.outcome().name(), start);
    line.addProperty("entry_id", r.entryId());
    line.addProperty("attempts", r.attempts());
    if (!r.message().isEmpty()) {
      line.addProperty("message", r.message());
    }
    if (!r.destinations().isEmpty()) {
      JsonObject destinations = new JsonObject();
      r.destinations().forEach(destinations::addProperty);
      line.add("destinations", destinations);
    }
    return line;
  }

  /** A refusal, or another typed error of the library (reported as UNKNOWN with its code). */
  private static JsonObject failure(int step, int index, Throwable error, long start) {
    if (!(error instanceof WalException e)) {
      throw new IllegalStateException("the library failed: " + error, error);
    }
    boolean refused = e instanceof RefusedException;
    JsonObject line = line(step, index, refused ? "REFUSED" : "UNKNOWN", start);
    line.addProperty("attempts", e.attempts());
    line.addProperty("code", e.code().name());
    line.addProperty("field", refused ? ((RefusedException) e).field() : "");
    if (e.getMessage() != null && !e.getMessage().isEmpty()) {
      line.addProperty("message", e.getMessage());
    }
    return line;
  }

  private static JsonObject line(int step, int index, String outcome, long start) {
    JsonObject line = new JsonObject();
    line.addProperty("step", step);
    line.addProperty("index", index);
    line.addProperty("outcome", outcome);
    line.addProperty("elapsed_millis", (System.nanoTime() - start) / 1_000_000);
    return line;
  }

  private static Throwable cause(Throwable e) {
    while (e instanceof CompletionException && e.getCause() != null) {
      e = e.getCause();
    }
    return e;
  }

  private synchronized void print(JsonObject line) {
    out.println(line);
  }
}
