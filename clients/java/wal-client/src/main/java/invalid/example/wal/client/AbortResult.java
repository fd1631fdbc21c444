package invalid.example.wal.client;

/** An abort that succeeded (the transaction is dropped, or was unknown or already aborted). */
public record AbortResult(int attempts) {}
