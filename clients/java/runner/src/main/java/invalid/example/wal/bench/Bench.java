package invalid.example.wal.bench;

import invalid.example.wal.client.Outcome;
import invalid.example.wal.client.RefusedException;
import invalid.example.wal.client.Tls;
import invalid.example.wal.client.WalClient;
import invalid.example.wal.client.Write;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.locks.LockSupport;

/**
 * Writes at a fixed rate for a few seconds through the library (batched, as concurrent writes
 * are) and prints the writes answered per second and the latency percentiles. Latency is
 * measured from each write's scheduled time, so a stall counts against every write it delayed.
 * One write is awaited first, outside the measure, so that the connection is up.
 *
 * <p>{@code bench ADDRESS NAMESPACE [--rate N] [--seconds S] [--payload-bytes B]
 * [--tls-ca F --tls-cert F --tls-key F] [--server-name NAME]}
 */
public final class Bench {
  private Bench() {}

  public static void main(String[] args) {
    if (args.length < 2) {
      System.err.println("usage: bench ADDRESS NAMESPACE [--rate N] [--seconds S] "
          + "[--payload-bytes B] [--tls-ca F --tls-cert F --tls-key F] [--server-name NAME]");
      System.exit(2);
    }
    String address = args[0];
    String namespace = args[1];
    Map<String, String> options = new TreeMap<>();
    for (int i = 2; i + 1 < args.length; i += 2) {
      options.put(args[i], args[i + 1]);
    }
    int rate = Integer.parseInt(options.getOrDefault("--rate", "1000"));
    double seconds = Double.parseDouble(options.getOrDefault("--seconds", "5"));
    int payloadBytes = Integer.parseInt(options.getOrDefault("--payload-bytes", "100"));
    var builder = WalClient.builder().producers(List.of(address));
    if (options.containsKey("--tls-ca")) {
      Tls tls = options.containsKey("--tls-cert")
          ? Tls.mutual(Path.of(options.get("--tls-ca")), Path.of(options.get("--tls-cert")),
              Path.of(options.get("--tls-key")))
          : Tls.serverOnly(Path.of(options.get("--tls-ca")));
      if (options.containsKey("--server-name")) {
        tls = tls.serverName(options.get("--server-name"));
      }
      builder.tls(tls);
    }
    int total = (int) Math.round(rate * seconds);
    byte[] payload = new byte[payloadBytes];
    Arrays.fill(payload, (byte) 'x');
    long[] latencies = new long[total];
    Map<String, Integer> outcomes = new TreeMap<>();
    List<CompletableFuture<?>> writes = new ArrayList<>(total);
    long start;
    long end;
    try (WalClient client = builder.build()) {
      // Connect and load the classes first: the bench measures writes, not the JVM's start.
      client.write(Write.builder(namespace, payload).key("bench-warm-up").build());
      start = System.nanoTime();
      long interval = 1_000_000_000L / rate;
      for (int i = 0; i < total; i++) {
        long due = start + i * interval;
        long wait = due - System.nanoTime();
        if (wait > 0) {
          LockSupport.parkNanos(wait);
        }
        int n = i;
        Write write = Write.builder(namespace, payload).key("bench-" + (i % 64))
            .deadline(Duration.ofSeconds(10)).build();
        writes.add(client.writeAsync(write).handle((r, e) -> {
          latencies[n] = System.nanoTime() - due;
          String outcome = r != null ? r.outcome().name()
              : e instanceof CompletionException c && c.getCause() instanceof RefusedException x
                  ? "REFUSED " + x.code() : "ERROR " + e;
          synchronized (outcomes) {
            outcomes.merge(outcome, 1, Integer::sum);
          }
          return null;
        }));
      }
      CompletableFuture.allOf(writes.toArray(CompletableFuture[]::new)).join();
      end = System.nanoTime();
    }
    Arrays.sort(latencies);
    double elapsed = (end - start) / 1e9;
    int answeredTrue = outcomes.getOrDefault(Outcome.TRUE.name(), 0);
    System.out.printf("bench: %d writes asked at %d/s to %s (namespace %s, %d-byte payloads)%n",
        total, rate, address, namespace, payloadBytes);
    System.out.printf("  %.0f writes/s answered TRUE (%d in %.2f s); outcomes %s%n",
        answeredTrue / elapsed, answeredTrue, elapsed, outcomes);
    System.out.printf("  latency p50 %.1f ms, p99 %.1f ms, max %.1f ms%n",
        millis(latencies, 0.50), millis(latencies, 0.99), latencies[total - 1] / 1e6);
  }

  private static double millis(long[] sorted, double quantile) {
    int index = (int) Math.min(sorted.length - 1, Math.ceil(quantile * sorted.length) - 1);
    return sorted[Math.max(index, 0)] / 1e6;
  }
}
