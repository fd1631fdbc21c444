package invalid.example.wal.client;

import java.util.List;

/** Where a batch ends: at the cap of writes, or before the write that would pass the byte cap. */
final class BatchCut {
  private BatchCut() {}

  /**
   * How many of the leading {@code sizes} (serialized bytes of each ready write, in order) go
   * into the next batch: at least one (a write larger than the byte cap goes alone), at most
   * {@code maxWrites}, and no more bytes than {@code maxBytes}.
   */
  static int cut(List<Integer> sizes, int maxWrites, long maxBytes) {
    int n = Math.min(sizes.size(), maxWrites);
    long bytes = 0;
    for (int i = 0; i < n; i++) {
      bytes += sizes.get(i) + 8; // the field's tag and length in the batch request
      if (bytes > maxBytes && i > 0) {
        return i;
      }
    }
    return n;
  }

  /** Whether the ready writes already fill a batch, so it leaves without waiting the linger. */
  static boolean full(List<Integer> sizes, int maxWrites, long maxBytes) {
    return cut(sizes, maxWrites, maxBytes) < sizes.size() || sizes.size() >= maxWrites;
  }
}
