package wal

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
)

// attemptFunc makes one attempt under ctx (whose deadline is the call's) and says which
// producer it used (-1 when not known, as for a batch). avoid is the producer whose call just
// failed in transport, -1 for none.
type attemptFunc func(ctx context.Context, avoid int) (answer, int)

// ended is how a retried call ended: its last answer and what its attempts add up to.
type ended struct {
	last        answer
	attempts    int
	mayBeStored bool // an attempt answered UNKNOWN or failed in transport
	shed        bool // an attempt was shed
}

// answered says the call ended with an answer (TRUE, FALSE, or a call's success).
func (e ended) answered() bool { return e.last.kind == answered }

// refused says the call ended with a refusal from the producer (not the deadline's).
func (e ended) refused() bool { return e.last.kind == refused }

// retry makes attempts until one is answered or refused, or until the deadline: UNKNOWN and
// transport failures after the backoff (a transport failure on another producer), shed
// attempts after the wait the producer asked for. No attempt starts after the deadline.
// firstQueued says the first attempt was already handed to the batcher: it is awaited even
// when the deadline has passed, since only the batcher knows whether it left.
func (c *Client) retry(ctx context.Context, deadline time.Time, attempt attemptFunc, firstQueued bool) ended {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var e ended
	avoid, step := -1, 0
	for ; firstQueued || ctx.Err() == nil; firstQueued = false {
		a, used := attempt(ctx, avoid)
		e.attempts++
		e.last = a
		if a.kind == notSent {
			break
		}
		avoid = -1
		var wait time.Duration
		switch a.kind {
		case answered, refused:
			return e
		case unknown, transport:
			e.mayBeStored = true
			if a.kind == transport {
				avoid = used
			}
			wait = backoff(c.opts.BackoffBase, c.opts.BackoffMax, step)
			step++
		case shed:
			e.shed = true
			if a.retryAfter > 0 {
				wait = shedWait(a.retryAfter)
			} else {
				wait = backoff(c.opts.BackoffBase, c.opts.BackoffMax, step)
				step++
			}
		}
		if !sleepBefore(ctx, wait, deadline) {
			break
		}
	}
	return e
}

// sleepBefore waits d unless the next attempt could not start before the deadline (or the
// caller cancelled): then it returns false at once, since waiting could change nothing.
func sleepBefore(ctx context.Context, d time.Duration, deadline time.Time) bool {
	if !time.Now().Add(d).Before(deadline) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// result turns a call that ended into the caller's answer: the answer itself; a refusal; or,
// at the deadline, what is known: UNKNOWN when an attempt may have stored the entry, refused
// with RESOURCE_EXHAUSTED when the producer shed the attempts and none may have stored it, and
// FALSE when nothing was sent (the deadline ended before the first attempt, or while the write
// waited for its batch).
func (e ended) result(entryID string) (Result, error) {
	a := e.last
	switch {
	case e.answered():
		r := a.response
		id := r.GetEntryId()
		if id == "" {
			id = entryID
		}
		return Result{
			Outcome:      outcomeOf(r.GetDurable()),
			EntryID:      id,
			Attempts:     e.attempts,
			Message:      r.GetMessage(),
			Destinations: destinationsOf(r),
		}, nil
	case e.refused():
		return Result{}, &RefusedError{Code: a.code, Field: a.field, Message: a.message, Attempts: e.attempts}
	case e.mayBeStored:
		return Result{Outcome: Unknown, EntryID: entryID, Attempts: e.attempts, Message: "the deadline ended; the last attempt: " + orDefault(a.message, "no answer")}, nil
	case e.shed:
		return Result{}, &RefusedError{Code: codes.ResourceExhausted, Message: a.message, Attempts: e.attempts}
	}
	return Result{Outcome: False, EntryID: entryID, Attempts: e.attempts, Message: orDefault(a.message, "the deadline ended before the first attempt")}, nil
}

func orDefault(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
