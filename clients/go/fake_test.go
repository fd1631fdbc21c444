package wal

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"example.invalid/wal/clients/go/walv1"
)

// fake is an in-memory producer whose answers the test writes; it records every call.
type fake struct {
	walv1.UnimplementedWriteAheadLogServer
	walv1.UnimplementedTransactionsServer

	mu      sync.Mutex
	single  []*walv1.WriteToLogRequest   // WriteToLog calls
	batches [][]*walv1.WriteToLogRequest // WriteToLogBatch calls
	appends []*walv1.AppendItemsRequest
	commits int
	traces  []string // each write call's traceparent

	write  func(n int, req *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) // n: calls with this id so far
	append func(n int, req *walv1.AppendItemsRequest) error                             // n: calls so far
	seen   map[string]int
}

func (f *fake) answer(req *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
	f.seen[req.GetIdempotencyId()]++
	if f.write == nil {
		return trueFor(req), nil
	}
	return f.write(f.seen[req.GetIdempotencyId()], req)
}

func (f *fake) WriteToLog(ctx context.Context, req *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.traces = append(f.traces, strings.Join(metadata.ValueFromIncomingContext(ctx, "traceparent"), ","))
	f.single = append(f.single, req)
	return f.answer(req)
}

func (f *fake) WriteToLogBatch(ctx context.Context, req *walv1.WriteToLogBatchRequest) (*walv1.WriteToLogBatchResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.traces = append(f.traces, strings.Join(metadata.ValueFromIncomingContext(ctx, "traceparent"), ","))
	f.batches = append(f.batches, req.GetWrites())
	resp := &walv1.WriteToLogBatchResponse{}
	for _, w := range req.GetWrites() {
		r, err := f.answer(w)
		if err != nil {
			resp.Results = append(resp.Results, batchResultOf(err))
		} else {
			resp.Results = append(resp.Results, &walv1.WriteResult{Response: r})
		}
	}
	return resp, nil
}

func (f *fake) AppendItems(_ context.Context, req *walv1.AppendItemsRequest) (*walv1.AppendItemsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appends = append(f.appends, req)
	if f.append != nil {
		if err := f.append(len(f.appends), req); err != nil {
			return nil, err
		}
	}
	return &walv1.AppendItemsResponse{Staged: uint32(len(req.GetItems()))}, nil
}

func (f *fake) CommitTransaction(_ context.Context, req *walv1.CommitTransactionRequest) (*walv1.WriteToLogResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits++
	return &walv1.WriteToLogResponse{Durable: walv1.Trilean_TRILEAN_TRUE, EntryId: req.GetTransactionId() + ":commit"}, nil
}

func trueFor(req *walv1.WriteToLogRequest) *walv1.WriteToLogResponse {
	return &walv1.WriteToLogResponse{Durable: walv1.Trilean_TRILEAN_TRUE, EntryId: req.GetIdempotencyId()}
}

// batchResultOf is what the producer puts in a batch for a refused write.
func batchResultOf(err error) *walv1.WriteResult {
	a := fromError(err)
	return &walv1.WriteResult{Code: int32(a.code), Error: a.message, Field: a.field, RetryAfterMillis: uint64(a.retryAfter.Milliseconds())}
}

// serve starts the fakes in memory and returns a client of them, closed with the test.
func serve(t *testing.T, opts Options, fakes ...*fake) *Client {
	t.Helper()
	listeners := map[string]*bufconn.Listener{}
	var addrs []string
	for i, f := range fakes {
		f.seen = map[string]int{}
		lis := bufconn.Listen(1 << 20)
		srv := grpc.NewServer()
		walv1.RegisterWriteAheadLogServer(srv, f)
		walv1.RegisterTransactionsServer(srv, f)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		addr := "passthrough:///fake-" + string(rune('a'+i))
		listeners["fake-"+string(rune('a'+i))] = lis
		addrs = append(addrs, addr)
	}
	opts.DialOptions = append(opts.DialOptions, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return listeners[addr].DialContext(ctx)
	}))
	c, err := New(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
