package invalid.example.wal.client;

import io.grpc.ClientInterceptor;
import io.grpc.Metadata;
import io.grpc.stub.AbstractStub;
import io.grpc.stub.MetadataUtils;

/** A W3C trace context, sent as the gRPC metadata the producer continues the trace from. */
record TraceContext(String traceparent, String tracestate) {
  private static final Metadata.Key<String> TRACEPARENT =
      Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER);
  private static final Metadata.Key<String> TRACESTATE =
      Metadata.Key.of("tracestate", Metadata.ASCII_STRING_MARSHALLER);

  static TraceContext of(String traceparent, String tracestate) {
    boolean none = (traceparent == null || traceparent.isEmpty())
        && (tracestate == null || tracestate.isEmpty());
    return none ? null : new TraceContext(traceparent, tracestate);
  }

  /** The stub carrying this context, or the stub itself when {@code trace} is null. */
  static <S extends AbstractStub<S>> S attach(S stub, TraceContext trace) {
    return trace == null ? stub : stub.withInterceptors(trace.interceptor());
  }

  private ClientInterceptor interceptor() {
    Metadata headers = new Metadata();
    if (traceparent != null && !traceparent.isEmpty()) {
      headers.put(TRACEPARENT, traceparent);
    }
    if (tracestate != null && !tracestate.isEmpty()) {
      headers.put(TRACESTATE, tracestate);
    }
    return MetadataUtils.newAttachHeadersInterceptor(headers);
  }
}
