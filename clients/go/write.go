package wal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/metadata"

	"example.invalid/wal/clients/go/walv1"
)

// Write is one mutation for a namespace's log.
type Write struct {
	Namespace string
	Payload   []byte
	// Key is the partition key: writes with the same key keep their order on the queue.
	// Empty: the entry id is the key.
	Key string
	// IdempotencyID is the entry's id, carried by every attempt. Empty: the library makes a
	// UUIDv7 before the first attempt.
	IdempotencyID string
	// Delay: deliver no earlier than this after the write. Jitter adds a random share of its
	// window (zero: the namespace's default). OriginalWriteTime orders replays (zero: now).
	Delay             time.Duration
	Jitter            time.Duration
	OriginalWriteTime time.Time
	// Target is where to deliver the entry. Nil: the namespace's default target.
	Target *Target
	// Traceparent and Tracestate are the caller's W3C trace context, sent as gRPC metadata so
	// the producer's span and every delivery of the entry join the caller's trace.
	Traceparent string
	Tracestate  string
	// Unbatched sends this write in its own WriteToLog call even when batching is on.
	Unbatched bool
	// AwaitDestinations asks the producer, once the entry is stored, to wait up to this long
	// (at most 60 s, never past the call's deadline) for the namespace's destinations to apply
	// it, and to say in Result.Destinations what each had done. Such a write is sent in a call
	// of its own: in a batch it would hold the others back. Zero: no wait.
	AwaitDestinations time.Duration
}

// Target names where an entry is delivered: a kind (cql, cache, kafka, http, region) and that
// kind's settings as a JSON object.
type Target struct {
	Kind         string
	SettingsJSON string
}

func (t *Target) proto() *walv1.Target {
	if t == nil {
		return nil
	}
	return &walv1.Target{Kind: t.Kind, SettingsJson: t.SettingsJSON}
}

// Pending is a write under way; see WriteAsync.
type Pending struct {
	done   chan struct{}
	result Result
	err    error
}

// Done is closed when the write has ended.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait waits for the write to end and returns what Write would have.
func (p *Pending) Wait() (Result, error) {
	<-p.done
	return p.result, p.err
}

// Write sends w and retries it until TRUE, FALSE, a refusal, or the deadline: ctx's, or the
// client's default. It returns a Result for TRUE, FALSE and (at the deadline) UNKNOWN, and a
// *RefusedError for a refusal.
func (c *Client) Write(ctx context.Context, w Write) (Result, error) {
	return c.WriteAsync(ctx, w).Wait()
}

// WriteAsync starts w and returns at once. A batched write is queued before WriteAsync
// returns, so writes started one after another by one goroutine are sent in that order.
func (c *Client) WriteAsync(ctx context.Context, w Write) *Pending {
	p := &Pending{done: make(chan struct{})}
	if err := c.begin(); err != nil {
		p.err = err
		close(p.done)
		return p
	}
	req, err := request(w)
	if err != nil {
		p.err = err
		close(p.done)
		c.running.Done()
		return p
	}
	deadline := c.deadline(ctx)
	tc := traceContext{w.Traceparent, w.Tracestate}
	attempt, queued := c.directAttempt(req, tc), false
	if c.batcher != nil && !w.Unbatched && w.AwaitDestinations == 0 {
		attempt, queued = c.batcher.attempts(req, tc, deadline), true
	}
	go func() {
		defer c.running.Done()
		defer close(p.done)
		p.result, p.err = c.retry(ctx, deadline, attempt, queued).result(req.IdempotencyId)
		c.observe(p.result, p.err)
	}()
	return p
}

// request builds the call, with the idempotency id every attempt carries.
func request(w Write) (*walv1.WriteToLogRequest, error) {
	id := w.IdempotencyID
	if id == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("wal: making an idempotency id: %w", err)
		}
		id = u.String()
	}
	if w.AwaitDestinations < 0 {
		return nil, fmt.Errorf("wal: AwaitDestinations %v is negative", w.AwaitDestinations)
	}
	req := &walv1.WriteToLogRequest{
		Namespace:               w.Namespace,
		Payload:                 w.Payload,
		Target:                  w.Target.proto(),
		IdempotencyId:           id,
		Key:                     w.Key,
		AwaitDestinationsMillis: uint32(min(w.AwaitDestinations.Milliseconds(), math.MaxUint32)),
	}
	if w.Delay != 0 || w.Jitter != 0 || !w.OriginalWriteTime.IsZero() {
		req.Lifecycle = &walv1.Lifecycle{
			DelayMillis:  w.Delay.Milliseconds(),
			JitterMillis: w.Jitter.Milliseconds(),
		}
		if !w.OriginalWriteTime.IsZero() {
			req.Lifecycle.OriginalWriteTimeMicros = w.OriginalWriteTime.UnixMicro()
		}
	}
	return req, nil
}

// directAttempt sends the write alone, in a WriteToLog call.
func (c *Client) directAttempt(req *walv1.WriteToLogRequest, tc traceContext) attemptFunc {
	return func(ctx context.Context, avoid int) (answer, int) {
		var resp *walv1.WriteToLogResponse
		used, err := c.call(tc.outgoing(ctx), avoid, func(ctx context.Context, p *producer) (err error) {
			resp, err = p.writes.WriteToLog(ctx, req)
			return err
		})
		if err != nil {
			return fromError(err), used
		}
		return fromResponse(resp), used
	}
}

// observe feeds Options.OnResult.
func (c *Client) observe(r Result, err error) {
	if c.opts.OnResult == nil {
		return
	}
	if refusal, ok := errors.AsType[*RefusedError](err); ok {
		c.opts.OnResult("REFUSED", refusal.Attempts)
	} else if err == nil {
		c.opts.OnResult(r.Outcome.String(), r.Attempts)
	}
}

// traceContext is a write's W3C trace context.
type traceContext struct{ traceparent, tracestate string }

// outgoing adds the trace context to the call's metadata.
func (t traceContext) outgoing(ctx context.Context) context.Context {
	if t.traceparent != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", t.traceparent)
	}
	if t.tracestate != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "tracestate", t.tracestate)
	}
	return ctx
}
