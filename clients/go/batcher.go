package wal

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"example.invalid/wal/clients/go/walv1"
)

// A queued write's state: the batcher and the waiting write each claim it once, so a write
// whose deadline ends while queued is either sent or known not to be.
const (
	queued int32 = iota
	sent
	abandoned
)

// item is one attempt of one write, waiting in the batcher's queue.
type item struct {
	req      *walv1.WriteToLogRequest
	trace    traceContext
	deadline time.Time
	queuedAt time.Time
	state    atomic.Int32
	done     chan answer // buffered: the batcher never waits for a write that gave up
}

// batcher sends the writes made concurrently together in WriteToLogBatch calls, in the order
// they were queued: a batch leaves when it holds MaxBatch writes or its first write has waited
// the linger, and at most MaxBatchesInFlight batches are in flight.
type batcher struct {
	c     *Client
	mu    sync.Mutex
	queue []*item
	wake  chan struct{} // buffered 1: something was queued
	slots chan struct{} // one token per batch that may be in flight
	quit  chan struct{}
	ended chan struct{}
}

func newBatcher(c *Client) *batcher {
	b := &batcher{
		c:     c,
		wake:  make(chan struct{}, 1),
		slots: make(chan struct{}, c.opts.MaxBatchesInFlight),
		quit:  make(chan struct{}),
		ended: make(chan struct{}),
	}
	go b.run()
	return b
}

func (b *batcher) stop() {
	close(b.quit)
	<-b.ended
}

// attempts queues the write's first attempt now, so that it keeps its place among writes made
// one after another, and returns the attempt function: its first call waits for that attempt,
// each later call queues another with the same request.
func (b *batcher) attempts(req *walv1.WriteToLogRequest, tc traceContext, deadline time.Time) attemptFunc {
	first := b.enqueue(req, tc, deadline)
	return func(ctx context.Context, _ int) (answer, int) {
		it := first
		if it == nil {
			it = b.enqueue(req, tc, deadline)
		}
		first = nil
		return it.wait(ctx), -1
	}
}

func (b *batcher) enqueue(req *walv1.WriteToLogRequest, tc traceContext, deadline time.Time) *item {
	it := &item{req: req, trace: tc, deadline: deadline, queuedAt: time.Now(), done: make(chan answer, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, it)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return it
}

// wait waits for the item's answer, or for the end of ctx (the write's deadline): then the
// attempt counts when its batch had left, and not when it was still queued.
func (it *item) wait(ctx context.Context) answer {
	select {
	case a := <-it.done:
		return a
	case <-ctx.Done():
		if it.state.CompareAndSwap(queued, abandoned) {
			return answer{kind: notSent, message: "the deadline ended before its batch was sent"}
		}
		return fromError(ctx.Err())
	}
}

func (b *batcher) run() {
	defer close(b.ended)
	for {
		select {
		case b.slots <- struct{}{}:
		case <-b.quit:
			return
		}
		batch := b.next()
		if batch == nil {
			return
		}
		go func() {
			defer func() { <-b.slots }()
			b.send(batch)
		}()
	}
}

// next waits for the next batch to be due and takes it from the queue; nil when stopped.
func (b *batcher) next() []*item {
	for {
		b.mu.Lock()
		var wait time.Duration
		if n := len(b.queue); n > 0 {
			wait = time.Until(b.queue[0].queuedAt.Add(b.c.opts.Linger))
			if n >= b.c.opts.MaxBatch || wait <= 0 {
				batch := b.take()
				b.mu.Unlock()
				if len(batch) > 0 {
					return batch
				}
				continue
			}
		}
		b.mu.Unlock()
		if !b.sleep(wait) {
			return nil
		}
	}
}

// sleep waits for something to be queued, or for wait when it is positive; false when stopped.
func (b *batcher) sleep(wait time.Duration) bool {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-b.wake:
	case <-timer:
	case <-b.quit:
		return false
	}
	return true
}

// take removes up to MaxBatch writes from the head of the queue, claiming each for sending.
// Writes that gave up while queued, or whose deadline has ended (their waiter then finds them
// not sent), are dropped. Called with b.mu held.
func (b *batcher) take() []*item {
	n := min(len(b.queue), b.c.opts.MaxBatch)
	batch := make([]*item, 0, n)
	now := time.Now()
	for _, it := range b.queue[:n] {
		if now.Before(it.deadline) && it.state.CompareAndSwap(queued, sent) {
			batch = append(batch, it)
		}
	}
	b.queue = append(b.queue[:0:0], b.queue[n:]...)
	return batch
}

// send makes one WriteToLogBatch call and answers each write of it on its own. The call's
// deadline is the latest of its writes'; each write stops waiting at its own. The call carries
// the trace context of its first write.
func (b *batcher) send(batch []*item) {
	req := &walv1.WriteToLogBatchRequest{Writes: make([]*walv1.WriteToLogRequest, len(batch))}
	deadline := batch[0].deadline
	for i, it := range batch {
		req.Writes[i] = it.req
		if it.deadline.After(deadline) {
			deadline = it.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var resp *walv1.WriteToLogBatchResponse
	_, err := b.c.call(batch[0].trace.outgoing(ctx), -1, func(ctx context.Context, p *producer) (err error) {
		resp, err = p.writes.WriteToLogBatch(ctx, req)
		return err
	})
	for i, it := range batch {
		switch {
		case err != nil:
			it.done <- fromError(err)
		case i < len(resp.GetResults()):
			it.done <- fromWriteResult(resp.GetResults()[i])
		default:
			it.done <- answer{kind: unknown, message: "the batch response holds fewer results than writes"}
		}
	}
}
