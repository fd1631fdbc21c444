package invalid.example.wal.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.UUID;
import org.junit.jupiter.api.Test;

class IdsTest {
  @Test
  void idsAreUuidV7CarryingTheirTime() {
    long millis = 1_764_000_000_123L;
    UUID id = Ids.uuidV7(millis);
    assertEquals(7, id.version());
    assertEquals(2, id.variant());
    assertEquals(millis, id.getMostSignificantBits() >>> 16);
  }

  @Test
  void idsAreUniqueAndOrderedByTime() {
    String first = Ids.uuidV7(1000).toString();
    String later = Ids.uuidV7(2000).toString();
    assertTrue(first.compareTo(later) < 0);
    assertNotEquals(Ids.uuidV7(1000), Ids.uuidV7(1000));
  }
}
