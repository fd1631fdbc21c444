package wal

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"example.invalid/wal/clients/go/walv1"
)

func TestWhichCodesAreRetried(t *testing.T) {
	cases := map[codes.Code]kind{
		codes.Unavailable:        transport,
		codes.DeadlineExceeded:   transport,
		codes.Canceled:           transport,
		codes.Internal:           transport,
		codes.Unknown:            transport,
		codes.Aborted:            transport,
		codes.ResourceExhausted:  shed,
		codes.InvalidArgument:    refused,
		codes.NotFound:           refused,
		codes.PermissionDenied:   refused,
		codes.Unauthenticated:    refused,
		codes.FailedPrecondition: refused,
		codes.AlreadyExists:      refused,
		codes.OutOfRange:         refused,
		codes.Unimplemented:      refused,
	}
	for code, want := range cases {
		if got := kindOfCode(code); got != want {
			t.Errorf("%v: kind %d, want %d", code, got, want)
		}
	}
}

func TestTrileansAreSorted(t *testing.T) {
	for trilean, want := range map[walv1.Trilean]kind{
		walv1.Trilean_TRILEAN_TRUE:        answered,
		walv1.Trilean_TRILEAN_FALSE:       answered,
		walv1.Trilean_TRILEAN_UNKNOWN:     unknown,
		walv1.Trilean_TRILEAN_UNSPECIFIED: unknown,
	} {
		if got := fromResponse(&walv1.WriteToLogResponse{Durable: trilean}).kind; got != want {
			t.Errorf("%v: kind %d, want %d", trilean, got, want)
		}
	}
}

func TestARefusalNamesTheFieldOfItsBadRequest(t *testing.T) {
	st, err := status.New(codes.InvalidArgument, "payload is empty").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "payload", Description: "empty"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := fromError(st.Err())
	if a.kind != refused || a.code != codes.InvalidArgument || a.field != "payload" || a.message != "payload is empty" {
		t.Errorf("got %+v", a)
	}
}

func TestASheddingNamesItsRetryInfo(t *testing.T) {
	st, err := status.New(codes.ResourceExhausted, "over the rate").WithDetails(&errdetails.RetryInfo{
		RetryDelay: durationpb.New(120 * time.Millisecond),
	})
	if err != nil {
		t.Fatal(err)
	}
	if a := fromError(st.Err()); a.kind != shed || a.retryAfter != 120*time.Millisecond {
		t.Errorf("got %+v", a)
	}
}

func TestABatchResultCarriesItsFieldAndWait(t *testing.T) {
	a := fromWriteResult(&walv1.WriteResult{Code: int32(codes.InvalidArgument), Error: "bad delay", Field: "lifecycle.delay_millis"})
	if a.kind != refused || a.field != "lifecycle.delay_millis" {
		t.Errorf("refusal: got %+v", a)
	}
	a = fromWriteResult(&walv1.WriteResult{Code: int32(codes.ResourceExhausted), RetryAfterMillis: 75})
	if a.kind != shed || a.retryAfter != 75*time.Millisecond {
		t.Errorf("shed: got %+v", a)
	}
	a = fromWriteResult(&walv1.WriteResult{Response: &walv1.WriteToLogResponse{Durable: walv1.Trilean_TRILEAN_TRUE, EntryId: "e"}})
	if a.kind != answered || a.response.GetEntryId() != "e" {
		t.Errorf("answer: got %+v", a)
	}
}

func TestATransportFailureIsNotRefused(t *testing.T) {
	if a := fromError(errors.New("connection reset")); a.kind != transport {
		t.Errorf("a plain error: got %+v", a)
	}
}
