package invalid.example.wal.client;

/** The durable answer to a write: the platform's Trilean. Refusals are {@link RefusedException}s. */
public enum Outcome {
  /** The entry is on the namespace's queue; it will be delivered at least once. */
  TRUE,
  /** This attempt definitely stored nothing. Never retried by the library: the caller decides. */
  FALSE,
  /** The entry may or may not be stored: what is known when the deadline ended first. */
  UNKNOWN
}
