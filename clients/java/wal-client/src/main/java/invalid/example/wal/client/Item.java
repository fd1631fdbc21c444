package invalid.example.wal.client;

import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * One item of a two-phase transaction: a payload and, optionally, its own target (else the
 * namespace's default target). The helper numbers items 0 to n-1 in the order given.
 */
public record Item(byte[] payload, Target target) {
  public Item {
    Objects.requireNonNull(payload, "payload");
  }

  public static Item of(byte[] payload) {
    return new Item(payload, null);
  }

  public static Item of(String payload) {
    return new Item(payload.getBytes(StandardCharsets.UTF_8), null);
  }

  public static Item of(byte[] payload, Target target) {
    return new Item(payload, target);
  }
}
