package invalid.example.wal.client;

import io.grpc.ChannelCredentials;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.Objects;

/**
 * TLS to the producers, from PEM files: the CA that signed the producers' certificates and, for
 * mTLS, the client's certificate and key (PKCS#8). {@link #serverName} names the server to check
 * the certificate against when the address is an IP.
 */
public final class Tls {
  private final Path ca;
  private final Path cert;
  private final Path key;
  private final String serverName;

  private Tls(Path ca, Path cert, Path key, String serverName) {
    this.ca = Objects.requireNonNull(ca, "ca");
    this.cert = cert;
    this.key = key;
    this.serverName = serverName;
  }

  /** mTLS: the producers' CA, and the client's certificate and key. */
  public static Tls mutual(Path ca, Path cert, Path key) {
    return new Tls(ca, Objects.requireNonNull(cert, "cert"), Objects.requireNonNull(key, "key"),
        null);
  }

  /** Server-authenticated TLS only (for producers that do not ask for a client certificate). */
  public static Tls serverOnly(Path ca) {
    return new Tls(ca, null, null, null);
  }

  /** The name the producers' certificate must carry, when it is not the address's host. */
  public Tls serverName(String name) {
    return new Tls(ca, cert, key, name);
  }

  String serverName() {
    return serverName;
  }

  ChannelCredentials credentials() {
    try {
      var builder = TlsChannelCredentials.newBuilder().trustManager(ca.toFile());
      if (cert != null) {
        builder.keyManager(cert.toFile(), key.toFile());
      }
      return builder.build();
    } catch (IOException e) {
      throw new UncheckedIOException("reading the TLS files: " + e.getMessage(), e);
    }
  }
}
