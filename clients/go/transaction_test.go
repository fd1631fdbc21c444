package wal

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"example.invalid/wal/clients/go/walv1"
)

func items(n int) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = Item{Payload: fmt.Appendf(nil, "item-%d", i)}
	}
	return out
}

func sequences(req *walv1.AppendItemsRequest) []uint64 {
	var s []uint64
	for _, it := range req.GetItems() {
		s = append(s, it.GetSequence())
	}
	return s
}

func TestATransactionIsStagedInChunksNumberedInOrderThenCommitted(t *testing.T) {
	f := &fake{}
	c := serve(t, Options{}, f)
	r, err := c.Transaction(context.Background(), "ns", "t-1", items(25), 10)
	if err != nil || r.Outcome != True || r.Attempts != 1 || r.EntryID != "t-1:commit" {
		t.Fatalf("%+v, %v", r, err)
	}
	var got []string
	for _, a := range f.appends {
		s := sequences(a)
		got = append(got, fmt.Sprintf("%d-%d", s[0], s[len(s)-1]))
	}
	if fmt.Sprint(got) != "[0-9 10-19 20-24]" || f.commits != 1 {
		t.Errorf("appends %v, commits %d", got, f.commits)
	}
}

func TestAFailedAppendIsSentAgainIdentically(t *testing.T) {
	f := &fake{append: func(n int, _ *walv1.AppendItemsRequest) error {
		if n == 2 {
			return status.Error(codes.Unavailable, "the staging store")
		}
		return nil
	}}
	c := serve(t, Options{}, f)
	if r, err := c.Transaction(context.Background(), "ns", "t-2", items(20), 10); err != nil || r.Outcome != True {
		t.Fatalf("%+v, %v", r, err)
	}
	if len(f.appends) != 3 || !proto.Equal(f.appends[1], f.appends[2]) {
		t.Errorf("%d appends; the retry identical: %v", len(f.appends), len(f.appends) == 3 && proto.Equal(f.appends[1], f.appends[2]))
	}
}

func TestResumingACommittedTransactionCommitsIt(t *testing.T) {
	f := &fake{append: func(int, *walv1.AppendItemsRequest) error {
		return refusal(codes.FailedPrecondition, "transaction_id")
	}}
	c := serve(t, Options{}, f)
	if r, err := c.Transaction(context.Background(), "ns", "t-3", items(5), 0); err != nil || r.Outcome != True || f.commits != 1 {
		t.Fatalf("%+v, %v, commits %d", r, err, f.commits)
	}
}

func TestARefusedAppendIsTyped(t *testing.T) {
	f := &fake{append: func(int, *walv1.AppendItemsRequest) error {
		return refusal(codes.AlreadyExists, "items")
	}}
	c := serve(t, Options{}, f)
	_, err := c.Transaction(context.Background(), "ns", "t-4", items(5), 0)
	if refused, ok := errors.AsType[*RefusedError](err); !ok || refused.Code != codes.AlreadyExists || f.commits != 0 {
		t.Fatalf("%v, commits %d", err, f.commits)
	}
}

func TestATransactionWhoseDeadlineEndsBeforeTheCommitIsFalse(t *testing.T) {
	f := &fake{append: func(int, *walv1.AppendItemsRequest) error {
		return status.Error(codes.Unavailable, "the staging store")
	}}
	c := serve(t, Options{}, f)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r, err := c.Transaction(ctx, "ns", "t-5", items(5), 0)
	if err != nil || r.Outcome != False || r.Attempts < 2 || f.commits != 0 {
		t.Fatalf("%+v, %v, commits %d", r, err, f.commits)
	}
}
