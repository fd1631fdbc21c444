package invalid.example.wal.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

class BatchCutTest {
  @Test
  void aBatchHoldsAtMostTheCapOfWrites() {
    List<Integer> sizes = Collections.nCopies(1200, 10);
    assertEquals(500, BatchCut.cut(sizes, 500, 1 << 20));
    assertEquals(7, BatchCut.cut(sizes.subList(0, 7), 500, 1 << 20));
    assertTrue(BatchCut.full(sizes.subList(0, 500), 500, 1 << 20));
    assertFalse(BatchCut.full(sizes.subList(0, 499), 500, 1 << 20));
  }

  @Test
  void aBatchEndsBeforeTheWriteThatWouldPassTheByteCap() {
    List<Integer> sizes = List.of(400, 400, 400, 400);
    assertEquals(2, BatchCut.cut(sizes, 500, 1000));
    assertTrue(BatchCut.full(sizes, 500, 1000));
  }

  @Test
  void aWriteLargerThanTheByteCapGoesAlone() {
    assertEquals(1, BatchCut.cut(List.of(5000, 10), 500, 1000));
    assertEquals(1, BatchCut.cut(List.of(10, 5000), 500, 1000));
  }
}
