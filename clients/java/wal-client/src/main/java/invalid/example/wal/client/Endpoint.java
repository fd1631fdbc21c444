package invalid.example.wal.client;

import invalid.example.wal.v1.TransactionsGrpc;
import invalid.example.wal.v1.WriteAheadLogGrpc;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
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

  /** An endpoint with a channel of its own to {@code address}, plain or mutual TLS. */
  static Endpoint open(String address, Tls tls) {
    ChannelCredentials credentials =
        tls == null ? InsecureChannelCredentials.create() : tls.credentials();
    // "host:port" is not a URI: name it for the DNS resolver (which takes IPs too).
    String target = address.contains("://") || address.contains(":///") ? address
        : "dns:///" + address;
    var builder = Grpc.newChannelBuilder(target, credentials).userAgent("wal-client-java/0.1");
    if (tls != null && tls.serverName() != null) {
      builder.overrideAuthority(tls.serverName());
    }
    return new Endpoint(address, builder.build());
  }

  @Override
  public String toString() {
    return address;
  }
}
