package invalid.example.wal.client;

import com.google.protobuf.Any;
import com.google.rpc.BadRequest;
import com.google.rpc.RetryInfo;
import invalid.example.wal.v1.AbortTransactionRequest;
import invalid.example.wal.v1.AbortTransactionResponse;
import invalid.example.wal.v1.AppendItemsRequest;
import invalid.example.wal.v1.AppendItemsResponse;
import invalid.example.wal.v1.CommitTransactionRequest;
import invalid.example.wal.v1.TransactionsGrpc;
import invalid.example.wal.v1.Trilean;
import invalid.example.wal.v1.WriteAheadLogGrpc;
import invalid.example.wal.v1.WriteResult;
import invalid.example.wal.v1.WriteToLogBatchRequest;
import invalid.example.wal.v1.WriteToLogBatchResponse;
import invalid.example.wal.v1.WriteToLogRequest;
import invalid.example.wal.v1.WriteToLogResponse;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/**
 * An in-process producer whose answers a test scripts, recording every request it gets: the
 * library's logic checked without a network.
 */
final class FakeProducer implements AutoCloseable {
  final List<WriteToLogRequest> writes = new CopyOnWriteArrayList<>();
  final List<WriteToLogBatchRequest> batches = new CopyOnWriteArrayList<>();
  final List<AppendItemsRequest> appends = new CopyOnWriteArrayList<>();
  final List<CommitTransactionRequest> commits = new CopyOnWriteArrayList<>();
  final List<String> traceparents = new CopyOnWriteArrayList<>();
  volatile Function<WriteToLogRequest, Object> answer = w -> Trilean.TRILEAN_TRUE;
  volatile Function<AppendItemsRequest, Object> appendAnswer =
      a -> AppendItemsResponse.newBuilder().setStaged(a.getItemsCount()).build();
  volatile Function<CommitTransactionRequest, Object> commitAnswer = c -> Trilean.TRILEAN_TRUE;
  /** When set, every call fails with this status (a producer that is going away). */
  volatile Status down;
  final String name = "fake-" + UUID.randomUUID();
  private final Server server;

  FakeProducer() throws IOException {
    var headers = new io.grpc.ServerInterceptor() {
      @Override
      public <Q, R> io.grpc.ServerCall.Listener<Q> interceptCall(io.grpc.ServerCall<Q, R> call,
          io.grpc.Metadata metadata, io.grpc.ServerCallHandler<Q, R> next) {
        String tp = metadata.get(io.grpc.Metadata.Key.of("traceparent",
            io.grpc.Metadata.ASCII_STRING_MARSHALLER));
        if (tp != null) {
          traceparents.add(tp);
        }
        return next.startCall(call, metadata);
      }
    };
    server = InProcessServerBuilder.forName(name).directExecutor()
        .addService(io.grpc.ServerInterceptors.intercept(new Writes(), headers))
        .addService(new Transactions())
        .build()
        .start();
  }

  Endpoint endpoint() {
    return new Endpoint(name, InProcessChannelBuilder.forName(name).directExecutor().build());
  }

  /** A refusal as the producer sends it: a BadRequest detail naming the field. */
  static StatusRuntimeException refused(Status.Code code, String field, String message) {
    var bad = BadRequest.newBuilder().addFieldViolations(
        BadRequest.FieldViolation.newBuilder().setField(field).setDescription(message));
    return StatusProto.toStatusRuntimeException(com.google.rpc.Status.newBuilder()
        .setCode(code.value()).setMessage(message).addDetails(Any.pack(bad.build())).build());
  }

  /** A shed over the rate limit: RESOURCE_EXHAUSTED with a RetryInfo detail. */
  static StatusRuntimeException shed(long millis) {
    var info = RetryInfo.newBuilder().setRetryDelay(
        com.google.protobuf.Duration.newBuilder().setNanos((int) (millis * 1_000_000)));
    return StatusProto.toStatusRuntimeException(com.google.rpc.Status.newBuilder()
        .setCode(Status.Code.RESOURCE_EXHAUSTED.value()).setMessage("over the rate limit")
        .addDetails(Any.pack(info.build())).build());
  }

  private static WriteToLogResponse response(Trilean t, String id) {
    return WriteToLogResponse.newBuilder().setDurable(t).setEntryId(id)
        .setMessage(t == Trilean.TRILEAN_TRUE ? "" : "scripted " + t).build();
  }

  @Override
  public void close() {
    server.shutdownNow();
  }

  private final class Writes extends WriteAheadLogGrpc.WriteAheadLogImplBase {
    @Override
    public void writeToLog(WriteToLogRequest request, StreamObserver<WriteToLogResponse> out) {
      if (down != null) {
        out.onError(down.asRuntimeException());
        return;
      }
      writes.add(request);
      Object a = answer.apply(request);
      if (a instanceof StatusRuntimeException e) {
        out.onError(e);
      } else if (a instanceof WriteToLogResponse whole) {
        out.onNext(whole);
        out.onCompleted();
      } else {
        out.onNext(response((Trilean) a, request.getIdempotencyId()));
        out.onCompleted();
      }
    }

    @Override
    public void writeToLogBatch(WriteToLogBatchRequest request,
        StreamObserver<WriteToLogBatchResponse> out) {
      if (down != null) {
        out.onError(down.asRuntimeException());
        return;
      }
      batches.add(request);
      var response = WriteToLogBatchResponse.newBuilder();
      for (WriteToLogRequest w : request.getWritesList()) {
        writes.add(w);
        Object a = answer.apply(w);
        if (a instanceof StatusRuntimeException e) {
          var status = StatusProto.fromThrowable(e);
          String field = "";
          long retry = 0;
          for (var d : status.getDetailsList()) {
            try {
              if (d.is(BadRequest.class)) {
                field = d.unpack(BadRequest.class).getFieldViolations(0).getField();
              } else if (d.is(RetryInfo.class)) {
                retry = d.unpack(RetryInfo.class).getRetryDelay().getNanos() / 1_000_000;
              }
            } catch (com.google.protobuf.InvalidProtocolBufferException x) {
              throw new IllegalStateException(x);
            }
          }
          response.addResults(WriteResult.newBuilder().setCode(status.getCode())
              .setError(status.getMessage()).setField(field).setRetryAfterMillis(retry));
        } else {
          response.addResults(WriteResult.newBuilder()
              .setResponse(response((Trilean) a, w.getIdempotencyId())));
        }
      }
      out.onNext(response.build());
      out.onCompleted();
    }
  }

  private final class Transactions extends TransactionsGrpc.TransactionsImplBase {
    @Override
    public void appendItems(AppendItemsRequest request,
        StreamObserver<AppendItemsResponse> out) {
      appends.add(request);
      Object a = appendAnswer.apply(request);
      if (a instanceof StatusRuntimeException e) {
        out.onError(e);
      } else {
        out.onNext((AppendItemsResponse) a);
        out.onCompleted();
      }
    }

    @Override
    public void commitTransaction(CommitTransactionRequest request,
        StreamObserver<WriteToLogResponse> out) {
      commits.add(request);
      Object a = commitAnswer.apply(request);
      if (a instanceof StatusRuntimeException e) {
        out.onError(e);
      } else {
        out.onNext(response((Trilean) a, "marker-" + request.getTransactionId()));
        out.onCompleted();
      }
    }

    @Override
    public void abortTransaction(AbortTransactionRequest request,
        StreamObserver<AbortTransactionResponse> out) {
      out.onNext(AbortTransactionResponse.getDefaultInstance());
      out.onCompleted();
    }
  }
}
