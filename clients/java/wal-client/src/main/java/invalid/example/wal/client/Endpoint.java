package invalid.example.wal.client;

import invalid.example.wal.v1.TransactionsGrpc;
import invalid.example.wal.v1.WriteAheadLogGrpc;
import io.grpc.ManagedChannel;

/** One producer: its address, channel and stubs, and its health as {@link ProducerPool} sees it. */
final class Endpoint {
  final String address;
  final ManagedChannel channel;
  final WriteAheadLogGrpc.WriteAheadLogStub writes;
  final TransactionsGrpc.TransactionsStub transactions;

  // Guarded by the pool's lock.
  int failures;
  long pausedUntilNanos;
  boolean paused;
  boolean probing;

  Endpoint(String address, ManagedChannel channel) {
    this.address = address;
    this.channel = channel;
    this.writes = channel == null ? null : WriteAheadLogGrpc.newStub(channel);
    this.transactions = channel == null ? null : TransactionsGrpc.newStub(channel);
  }

  @Override
  public String toString() {
    return address;
  }
}
