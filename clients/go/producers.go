package wal

import (
	"sync"
	"time"

	"google.golang.org/grpc"

	"example.invalid/wal/clients/go/walv1"
)

// producer is one producer address, its connection and its health.
type producer struct {
	addr   string
	conn   *grpc.ClientConn
	writes walv1.WriteAheadLogClient
	txns   walv1.TransactionsClient

	// Guarded by pool.mu.
	pause       time.Duration // the current pause; 0 while healthy
	pausedUntil time.Time
	probing     bool // a call is trying the producer after its pause
}

// pool sends each call to the next producer, round robin, skipping the paused ones.
type pool struct {
	mu        sync.Mutex
	producers []*producer
	next      int
	pauseBase time.Duration
	pauseMax  time.Duration
	now       func() time.Time // time.Now; replaced in tests
}

// pick chooses the producer for a call, never `avoid` (the one whose call just failed in
// transport; -1 for none) when there is another. A producer past its pause gets one call that
// tries it again; when every producer is paused, the one whose pause ends first is tried.
func (p *pool) pick(avoid int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.producers)
	now := p.now()
	skip := func(i int) bool { return i == avoid && n > 1 }
	for k := range n {
		i := (p.next + k) % n
		pr := p.producers[i]
		if skip(i) {
			continue
		}
		if pr.pause == 0 || (!pr.probing && !now.Before(pr.pausedUntil)) {
			pr.probing = pr.pause != 0
			p.next = i + 1
			return i
		}
	}
	best := -1
	for i, pr := range p.producers {
		if !skip(i) && (best < 0 || pr.pausedUntil.Before(p.producers[best].pausedUntil)) {
			best = i
		}
	}
	p.next = best + 1
	return best
}

// health is what one call says of its producer.
type health int

const (
	// answeredCall: the producer answered (even a refusal); it is back in the rotation.
	answeredCall health = iota
	// failedCall: the call failed in transport; the producer is paused.
	failedCall
	// inconclusive: the caller's own deadline or cancellation cut the call short.
	inconclusive
)

// report records how a call to producer i ended. A transport failure pauses it (PauseBase,
// doubling while it keeps failing after each pause, up to PauseMax); an answer puts it back in
// the rotation. Failures of calls that were in flight when the pause began do not lengthen it.
func (p *pool) report(i int, h health) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.producers[i]
	now := p.now()
	switch {
	case h == inconclusive:
		pr.probing = false // another call may try it
	case h == answeredCall:
		pr.pause, pr.pausedUntil, pr.probing = 0, time.Time{}, false
	case pr.pause != 0 && now.Before(pr.pausedUntil):
	default:
		if pr.pause == 0 {
			pr.pause = p.pauseBase
		} else {
			pr.pause = min(pr.pause*2, p.pauseMax)
		}
		pr.pausedUntil = now.Add(pr.pause)
		pr.probing = false
	}
}

func (p *pool) close() error {
	var first error
	for _, pr := range p.producers {
		if err := pr.conn.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
