package invalid.example.wal.client;

import java.security.SecureRandom;
import java.util.UUID;

/** Idempotency ids the library makes: UUIDv7 (RFC 9562), time-ordered and random enough. */
final class Ids {
  private static final SecureRandom RANDOM = new SecureRandom();

  private Ids() {}

  static String uuidV7() {
    return uuidV7(System.currentTimeMillis()).toString();
  }

  static UUID uuidV7(long unixMillis) {
    byte[] random = new byte[10];
    RANDOM.nextBytes(random);
    long high = (unixMillis & 0xFFFF_FFFF_FFFFL) << 16;
    high |= 0x7000L; // version 7
    high |= ((random[0] & 0x0FL) << 8) | (random[1] & 0xFFL); // rand_a, 12 bits
    long low = 0x8000_0000_0000_0000L; // variant 10
    low |= (random[2] & 0x3FL) << 56;
    for (int i = 3; i < 10; i++) {
      low |= (random[i] & 0xFFL) << (8 * (9 - i));
    }
    return new UUID(high, low);
  }
}
