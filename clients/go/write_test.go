package wal

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"example.invalid/wal/clients/go/walv1"
)

func unknownOnce(n int, req *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
	if n == 1 {
		return &walv1.WriteToLogResponse{Durable: walv1.Trilean_TRILEAN_UNKNOWN, Message: "lost ack", EntryId: req.GetIdempotencyId()}, nil
	}
	return trueFor(req), nil
}

func refusal(code codes.Code, field string) error {
	st, _ := status.New(code, "refused "+field).WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field}},
	})
	return st.Err()
}

func TestUnknownIsRetriedWithTheSameIDUntilTrue(t *testing.T) {
	for _, unbatched := range []bool{true, false} {
		f := &fake{write: unknownOnce}
		c := serve(t, Options{}, f)
		r, err := c.Write(context.Background(), Write{Namespace: "ns", Payload: []byte("p"), Unbatched: unbatched})
		if err != nil || r.Outcome != True || r.Attempts != 2 {
			t.Fatalf("unbatched %v: %+v, %v", unbatched, r, err)
		}
		if f.seen[r.EntryID] != 2 || len(f.seen) != 1 {
			t.Errorf("unbatched %v: ids sent %v, want %s twice", unbatched, f.seen, r.EntryID)
		}
	}
}

func TestAGivenIdempotencyIDIsKept(t *testing.T) {
	c := serve(t, Options{}, &fake{})
	r, err := c.Write(context.Background(), Write{Namespace: "ns", Payload: []byte("p"), IdempotencyID: "mine"})
	if err != nil || r.EntryID != "mine" {
		t.Fatalf("%+v, %v", r, err)
	}
}

func TestFalseIsReturnedAtOnce(t *testing.T) {
	f := &fake{write: func(int, *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
		return &walv1.WriteToLogResponse{Durable: walv1.Trilean_TRILEAN_FALSE, Message: "broker said no"}, nil
	}}
	c := serve(t, Options{}, f)
	r, err := c.Write(context.Background(), Write{Namespace: "ns", Payload: []byte("p")})
	if err != nil || r.Outcome != False || r.Attempts != 1 || r.Message != "broker said no" {
		t.Fatalf("%+v, %v", r, err)
	}
}

func TestARefusalIsTypedAndNotRetried(t *testing.T) {
	f := &fake{write: func(int, *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
		return nil, refusal(codes.NotFound, "namespace")
	}}
	c := serve(t, Options{DisableBatching: true}, f)
	_, err := c.Write(context.Background(), Write{Namespace: "nope", Payload: []byte("p")})
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Code != codes.NotFound || refused.Field != "namespace" || refused.Attempts != 1 {
		t.Fatalf("%#v", err)
	}
	if len(f.single) != 1 {
		t.Errorf("%d calls", len(f.single))
	}
}

func TestUnknownUntilTheDeadlineEndsUnknownByIt(t *testing.T) {
	f := &fake{write: func(_ int, req *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
		return &walv1.WriteToLogResponse{Durable: walv1.Trilean_TRILEAN_UNKNOWN, Message: "withheld"}, nil
	}}
	c := serve(t, Options{}, f)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, err := c.Write(ctx, Write{Namespace: "ns", Payload: []byte("p")})
	if err != nil || r.Outcome != Unknown || r.Attempts < 2 || r.EntryID == "" {
		t.Fatalf("%+v, %v", r, err)
	}
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Errorf("took %v", took)
	}
}

func TestSheddingUntilTheDeadlineIsRefusedWithResourceExhausted(t *testing.T) {
	shedding := func(int, *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
		st, _ := status.New(codes.ResourceExhausted, "over the rate").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(20 * time.Millisecond)})
		return nil, st.Err()
	}
	c := serve(t, Options{}, &fake{write: shedding})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Write(ctx, Write{Namespace: "ns", Payload: []byte("p")})
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Code != codes.ResourceExhausted || refused.Attempts < 2 {
		t.Fatalf("%#v", err)
	}
}

func TestSheddingWaitsWhatTheProducerAsksThenWrites(t *testing.T) {
	f := &fake{write: func(n int, req *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
		if n == 1 {
			st, _ := status.New(codes.ResourceExhausted, "over the rate").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(100 * time.Millisecond)})
			return nil, st.Err()
		}
		return trueFor(req), nil
	}}
	c := serve(t, Options{DisableBatching: true}, f)
	start := time.Now()
	r, err := c.Write(context.Background(), Write{Namespace: "ns", Payload: []byte("p")})
	if err != nil || r.Outcome != True || r.Attempts != 2 {
		t.Fatalf("%+v, %v", r, err)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("retried after %v, before the 100 ms asked", took)
	}
}

func TestConcurrentWritesAreSplitIntoBatchesInOrder(t *testing.T) {
	f := &fake{}
	c := serve(t, Options{MaxBatch: 3, Linger: 50 * time.Millisecond}, f)
	var pending []*Pending
	for i := range 7 {
		pending = append(pending, c.WriteAsync(context.Background(), Write{Namespace: "ns", Key: "k", Payload: fmt.Appendf(nil, "w%d", i)}))
	}
	for i, p := range pending {
		if r, err := p.Wait(); err != nil || r.Outcome != True || r.Attempts != 1 {
			t.Fatalf("write %d: %+v, %v", i, r, err)
		}
	}
	var sizes []int
	var order []string
	for _, b := range f.batches {
		sizes = append(sizes, len(b))
		for _, w := range b {
			order = append(order, string(w.GetPayload()))
		}
	}
	if fmt.Sprint(sizes) != "[3 3 1]" || fmt.Sprint(order) != "[w0 w1 w2 w3 w4 w5 w6]" {
		t.Errorf("batches %v, order %v", sizes, order)
	}
}

func TestOneBadWriteOfABatchFailsAlone(t *testing.T) {
	f := &fake{write: func(_ int, req *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
		if len(req.GetPayload()) == 0 {
			return nil, refusal(codes.InvalidArgument, "payload")
		}
		return trueFor(req), nil
	}}
	c := serve(t, Options{Linger: 20 * time.Millisecond}, f)
	good := c.WriteAsync(context.Background(), Write{Namespace: "ns", Payload: []byte("ok")})
	bad := c.WriteAsync(context.Background(), Write{Namespace: "ns"})
	if r, err := good.Wait(); err != nil || r.Outcome != True {
		t.Errorf("good: %+v, %v", r, err)
	}
	_, err := bad.Wait()
	if refused, ok := errors.AsType[*RefusedError](err); !ok || refused.Field != "payload" {
		t.Errorf("bad: %v", err)
	}
	if len(f.batches) != 1 {
		t.Errorf("%d batches, want the two writes in one", len(f.batches))
	}
}

func TestAWriteRetriedAfterATransportFailureGoesToAnotherProducer(t *testing.T) {
	down := &fake{write: func(int, *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
		return nil, status.Error(codes.Unavailable, "going away")
	}}
	up := &fake{}
	c := serve(t, Options{DisableBatching: true}, down, up)
	for i := range 6 {
		r, err := c.Write(context.Background(), Write{Namespace: "ns", Payload: []byte("p")})
		if err != nil || r.Outcome != True {
			t.Fatalf("write %d: %+v, %v", i, r, err)
		}
	}
	// The first write met the failure; the paused producer got no other call.
	if len(down.single) != 1 || len(up.single) != 6 {
		t.Errorf("calls: down %d, up %d", len(down.single), len(up.single))
	}
}

func TestWritesAfterCloseAreRefusedWithErrClosed(t *testing.T) {
	c := serve(t, Options{}, &fake{})
	_ = c.Close()
	if _, err := c.Write(context.Background(), Write{Namespace: "ns", Payload: []byte("p")}); !errors.Is(err, ErrClosed) {
		t.Errorf("%v", err)
	}
}

func TestAWriteWhoseContextEndedBeforeItLeftIsFalseAndNotSent(t *testing.T) {
	for _, unbatched := range []bool{true, false} {
		f := &fake{}
		c := serve(t, Options{Linger: 20 * time.Millisecond}, f)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r, err := c.Write(ctx, Write{Namespace: "ns", Payload: []byte("p"), Unbatched: unbatched})
		if err != nil || r.Outcome != False {
			t.Errorf("unbatched %v: %+v, %v", unbatched, r, err)
		}
		time.Sleep(40 * time.Millisecond)
		if len(f.single)+len(f.batches) != 0 {
			t.Errorf("unbatched %v: sent anyway", unbatched)
		}
	}
}

func TestAWriteWhoseDeadlineEndsWhileItWaitsForItsBatchIsFalse(t *testing.T) {
	f := &fake{write: func(_ int, req *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
		if string(req.GetPayload()) == "slow" {
			time.Sleep(300 * time.Millisecond)
		}
		return trueFor(req), nil
	}}
	c := serve(t, Options{}, f)
	slow := c.WriteAsync(context.Background(), Write{Namespace: "ns", Payload: []byte("slow")})
	time.Sleep(50 * time.Millisecond) // the slow batch is in flight, the only one allowed
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r, err := c.Write(ctx, Write{Namespace: "ns", Payload: []byte("late")})
	if err != nil || r.Outcome != False || r.Attempts != 1 {
		t.Errorf("late: %+v, %v", r, err)
	}
	if r, err := slow.Wait(); err != nil || r.Outcome != True {
		t.Errorf("slow: %+v, %v", r, err)
	}
	if len(f.batches) != 1 {
		t.Errorf("%d batches: the late write was sent", len(f.batches))
	}
}

func TestTheTraceContextGoesAsMetadataAndABatchCarriesItsFirstWrites(t *testing.T) {
	f := &fake{}
	c := serve(t, Options{Linger: 20 * time.Millisecond}, f)
	const first, second = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if _, err := c.Write(context.Background(), Write{Namespace: "ns", Payload: []byte("p"), Traceparent: first, Unbatched: true}); err != nil {
		t.Fatal(err)
	}
	a := c.WriteAsync(context.Background(), Write{Namespace: "ns", Payload: []byte("p"), Traceparent: second})
	b := c.WriteAsync(context.Background(), Write{Namespace: "ns", Payload: []byte("p"), Traceparent: first})
	_, _ = a.Wait()
	_, _ = b.Wait()
	if fmt.Sprint(f.traces) != fmt.Sprint([]string{first, second}) || len(f.batches) != 1 {
		t.Errorf("traceparents %v over %d batches", f.traces, len(f.batches))
	}
}

func TestAWriteAwaitingItsDestinationsGoesAloneAndHearsEach(t *testing.T) {
	f := &fake{write: func(n int, req *walv1.WriteToLogRequest) (*walv1.WriteToLogResponse, error) {
		if n == 1 {
			return &walv1.WriteToLogResponse{Durable: walv1.Trilean_TRILEAN_UNKNOWN, Message: "lost ack"}, nil
		}
		resp := trueFor(req)
		if req.GetAwaitDestinationsMillis() > 0 {
			resp.Destinations = []*walv1.DestinationOutcome{
				{Destination: "default", State: walv1.DestinationState_DESTINATION_STATE_APPLIED},
				{Destination: "cache", State: walv1.DestinationState_DESTINATION_STATE_PENDING},
				{Destination: "hook", State: walv1.DestinationState_DESTINATION_STATE_DEAD_LETTERED},
			}
		}
		return resp, nil
	}}
	c := serve(t, Options{}, f) // batching on, as by default
	r, err := c.Write(context.Background(), Write{Namespace: "ns", Payload: []byte("p"), AwaitDestinations: 2500 * time.Millisecond})
	if err != nil || r.Outcome != True || r.Attempts != 2 {
		t.Fatalf("%+v, %v", r, err)
	}
	want := map[string]string{"default": "applied", "cache": "pending", "hook": "dead_lettered"}
	if fmt.Sprint(r.Destinations) != fmt.Sprint(want) {
		t.Errorf("destinations %v, want %v", r.Destinations, want)
	}
	// Each attempt its own WriteToLog, though the client batches, each asking for the wait.
	if len(f.batches) != 0 || len(f.single) != 2 {
		t.Fatalf("calls: %d single, %d batches", len(f.single), len(f.batches))
	}
	for _, req := range f.single {
		if req.GetAwaitDestinationsMillis() != 2500 {
			t.Errorf("await_destinations_millis %d, want 2500", req.GetAwaitDestinationsMillis())
		}
	}
	// A write that does not wait hears of no destination.
	r, err = c.Write(context.Background(), Write{Namespace: "ns", Payload: []byte("q"), Unbatched: true})
	if err != nil || r.Destinations != nil {
		t.Fatalf("%+v, %v", r, err)
	}
}
