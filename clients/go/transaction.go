package wal

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"example.invalid/wal/clients/go/walv1"
)

// Item is one mutation of a two-phase transaction.
type Item struct {
	Payload []byte
	// Target is where to apply the item. Nil: the namespace's default target.
	Target *Target
}

// Transaction writes items as one two-phase transaction: it stages them in AppendItems calls of
// chunk items (Options.TransactionChunk when chunk is 0 or less), numbered 0 to n-1 in the
// order given, then commits them. id is the transaction's idempotency key: calling Transaction
// again with the same id and items after any failure completes the transaction, applied once.
//
// The Result is the commit's: TRUE when the commit marker is on the queue, UNKNOWN when the
// deadline ended while the commit was retried (the transaction is committed and the producers
// queue its marker by themselves). One deadline covers the appends and the commit: FALSE
// means it ended before the commit was sent, so nothing was committed. Refusals are
// *RefusedError.
func (c *Client) Transaction(ctx context.Context, namespace, id string, items []Item, chunk int) (Result, error) {
	if err := c.begin(); err != nil {
		return Result{}, err
	}
	defer c.running.Done()
	if chunk <= 0 {
		chunk = c.opts.TransactionChunk
	}
	deadline := c.deadline(ctx)
	for start := 0; start < len(items); start += chunk {
		req := appendRequest(namespace, id, items, start, min(start+chunk, len(items)))
		e := c.retry(ctx, deadline, c.appendAttempt(req), false)
		switch {
		case e.answered():
			continue
		case e.refused():
			refusal := &RefusedError{Code: e.last.code, Field: e.last.field, Message: e.last.message, Attempts: e.attempts}
			// An append to a transaction already committed (by an earlier call that did not
			// hear the commit's answer) is refused; its commit then answers TRUE again. An
			// aborted or expired one's commit is refused in turn, naming why.
			if refusal.Code == codes.FailedPrecondition && refusal.Field == "transaction_id" {
				return c.commit(ctx, deadline, namespace, id, uint64(len(items)))
			}
			return Result{}, refusal
		}
		if e.shed && !e.mayBeStored {
			// Shed until the deadline: refused as a write would be (BEHAVIOUR.md).
			return Result{}, &RefusedError{Code: codes.ResourceExhausted, Message: e.last.message, Attempts: e.attempts}
		}
		// The deadline ended before the commit was sent: nothing is committed, so nothing
		// will be applied.
		return Result{
			Outcome:  False,
			Attempts: e.attempts,
			Message: fmt.Sprintf("not committed: staging ended at the deadline at items %d to %d (%s); call again with the same id and items to resume",
				start, start+len(req.Items)-1, orDefault(e.last.message, "no attempt")),
		}, nil
	}
	return c.commit(ctx, deadline, namespace, id, uint64(len(items)))
}

// appendRequest is the AppendItems call for items[from:to]. It is built once and sent again
// identically when retried, which the producer accepts without change.
func appendRequest(namespace, id string, items []Item, from, to int) *walv1.AppendItemsRequest {
	req := &walv1.AppendItemsRequest{Namespace: namespace, TransactionId: id}
	for seq := from; seq < to; seq++ {
		req.Items = append(req.Items, &walv1.TransactionItem{
			Sequence: uint64(seq),
			Target:   items[seq].Target.proto(),
			Payload:  items[seq].Payload,
		})
	}
	return req
}

func (c *Client) appendAttempt(req *walv1.AppendItemsRequest) attemptFunc {
	return func(ctx context.Context, avoid int) (answer, int) {
		used, err := c.call(ctx, avoid, func(ctx context.Context, p *producer) error {
			_, err := p.txns.AppendItems(ctx, req)
			return err
		})
		if err != nil {
			return fromError(err), used
		}
		return answer{kind: answered}, used
	}
}

// Commit commits a transaction of itemCount staged items (sequences 0 to itemCount-1), retried
// after UNKNOWN or a transport failure until TRUE or the deadline. A commit never answers
// FALSE.
func (c *Client) Commit(ctx context.Context, namespace, id string, itemCount uint64) (Result, error) {
	if err := c.begin(); err != nil {
		return Result{}, err
	}
	defer c.running.Done()
	return c.commit(ctx, c.deadline(ctx), namespace, id, itemCount)
}

func (c *Client) commit(ctx context.Context, deadline time.Time, namespace, id string, itemCount uint64) (Result, error) {
	req := &walv1.CommitTransactionRequest{Namespace: namespace, TransactionId: id, ItemCount: itemCount}
	e := c.retry(ctx, deadline, func(ctx context.Context, avoid int) (answer, int) {
		var resp *walv1.WriteToLogResponse
		used, err := c.call(ctx, avoid, func(ctx context.Context, p *producer) (err error) {
			resp, err = p.txns.CommitTransaction(ctx, req)
			return err
		})
		if err != nil {
			return fromError(err), used
		}
		return fromResponse(resp), used
	}, false)
	return e.result("")
}

// Abort drops a transaction that is not committed; aborting one already aborted, or unknown,
// succeeds. It is retried after a transport failure until the deadline. A committed
// transaction's abort is a *RefusedError (FAILED_PRECONDITION).
func (c *Client) Abort(ctx context.Context, namespace, id string) error {
	if err := c.begin(); err != nil {
		return err
	}
	defer c.running.Done()
	req := &walv1.AbortTransactionRequest{Namespace: namespace, TransactionId: id}
	e := c.retry(ctx, c.deadline(ctx), func(ctx context.Context, avoid int) (answer, int) {
		used, err := c.call(ctx, avoid, func(ctx context.Context, p *producer) error {
			_, err := p.txns.AbortTransaction(ctx, req)
			return err
		})
		if err != nil {
			return fromError(err), used
		}
		return answer{kind: answered}, used
	}, false)
	switch {
	case e.answered():
		return nil
	case e.refused():
		return &RefusedError{Code: e.last.code, Field: e.last.field, Message: e.last.message, Attempts: e.attempts}
	case e.shed && !e.mayBeStored:
		return &RefusedError{Code: codes.ResourceExhausted, Message: e.last.message, Attempts: e.attempts}
	}
	return fmt.Errorf("wal: abort of transaction %q had no answer by the deadline after %d attempts: %s",
		id, e.attempts, orDefault(e.last.message, "no attempt was made"))
}
