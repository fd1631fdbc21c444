package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"example.invalid/wal/clients/go/walv1"
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("wal: the client is closed")

// Client writes to a namespace's write-ahead log through one or more producers. It is safe for
// concurrent use, and concurrent writes are what its batching is for: make one per process.
type Client struct {
	opts    Options
	pool    *pool
	batcher *batcher // nil when batching is off

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup // calls in progress, which Close waits for
}

// New connects lazily to the producers at addrs ("host:port", or any gRPC target) and returns
// a client that sends each call to the next one, round robin.
func New(addrs []string, opts Options) (*Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("wal: New needs at least one producer address")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dial, err := dialOptions(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: opts, pool: &pool{pauseBase: opts.PauseBase, pauseMax: opts.PauseMax, now: time.Now}}
	for _, addr := range addrs {
		conn, err := grpc.NewClient(addr, dial...)
		if err != nil {
			_ = c.pool.close()
			return nil, fmt.Errorf("wal: producer %q: %w", addr, err)
		}
		c.pool.producers = append(c.pool.producers, &producer{
			addr:   addr,
			conn:   conn,
			writes: walv1.NewWriteAheadLogClient(conn),
			txns:   walv1.NewTransactionsClient(conn),
		})
	}
	if !opts.DisableBatching {
		c.batcher = newBatcher(c)
	}
	return c, nil
}

func dialOptions(opts Options) ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		var err error
		if creds, err = opts.TLS.credentials(); err != nil {
			return nil, err
		}
	}
	return append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Reconnect on about the schedule the pool pauses a failed producer on, so that a
		// producer back from a pause is usually connected again when it is tried.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: opts.PauseBase, Multiplier: 2, Jitter: 0.2, MaxDelay: opts.PauseMax},
			MinConnectTimeout: 5 * time.Second,
		}),
	}, opts.DialOptions...), nil
}

// Close waits for the calls in progress to end, then closes the connections. Calls made after
// it return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.running.Wait()
	if c.batcher != nil {
		c.batcher.stop()
	}
	return c.pool.close()
}

// begin counts a call in progress, or says the client is closed.
func (c *Client) begin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.running.Add(1)
	return nil
}

// deadline is the context's deadline, or the client's default from now.
func (c *Client) deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(c.opts.Deadline)
}

// call makes a unary call to a producer the pool picks, and reports to the pool how the
// producer did. A call cut short by the caller's own deadline or cancellation says nothing of
// the producer's health.
func (c *Client) call(ctx context.Context, avoid int, do func(context.Context, *producer) error) (int, error) {
	i := c.pool.pick(avoid)
	err := do(ctx, c.pool.producers[i])
	switch {
	case err == nil || fromError(err).kind != transport:
		c.pool.report(i, answeredCall)
	case ctx.Err() != nil:
		c.pool.report(i, inconclusive)
	default:
		c.pool.report(i, failedCall)
	}
	return i, err
}

func outcomeOf(t walv1.Trilean) Outcome {
	switch t {
	case walv1.Trilean_TRILEAN_TRUE:
		return True
	case walv1.Trilean_TRILEAN_FALSE:
		return False
	default:
		return Unknown
	}
}
