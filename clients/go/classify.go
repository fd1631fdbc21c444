package wal

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"example.invalid/wal/clients/go/walv1"
)

// kind is what one attempt's answer means for the retry loop.
type kind int

const (
	// none: no attempt yet (the zero value, so an empty answer never reads as answered).
	none kind = iota
	// answered: TRUE or FALSE (or, for calls without a Trilean, success): the loop ends.
	answered
	// unknown: UNKNOWN or TRILEAN_UNSPECIFIED; may be stored, retried after the backoff.
	unknown
	// transport: the call failed without an answer; may be stored, retried on another producer.
	transport
	// shed: RESOURCE_EXHAUSTED; nothing stored, retried after the producer's wait.
	shed
	// refused: a refusal; nothing stored, never retried.
	refused
	// notSent: a batched write whose deadline ended before its batch left: nothing sent.
	notSent
)

// answer is one attempt's outcome, whichever call made it.
type answer struct {
	kind       kind
	response   *walv1.WriteToLogResponse // when answered or unknown
	code       codes.Code                // when transport, shed or refused
	message    string
	field      string        // the refused field, when the producer named one
	retryAfter time.Duration // the wait a shed answer asks for; 0 when it does not say
}

// refusalCodes are never retried: the request is wrong or not allowed.
var refusalCodes = map[codes.Code]bool{
	codes.InvalidArgument:    true,
	codes.NotFound:           true,
	codes.PermissionDenied:   true,
	codes.Unauthenticated:    true,
	codes.FailedPrecondition: true,
	codes.AlreadyExists:      true,
	codes.OutOfRange:         true,
	codes.Unimplemented:      true,
}

// kindOfCode sorts a non-OK status code. Every code that is neither a refusal nor
// RESOURCE_EXHAUSTED is a transport failure (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED,
// INTERNAL, UNKNOWN, and the rare ABORTED or DATA_LOSS): the call may have stored the entry,
// so it is retried with the same id.
func kindOfCode(code codes.Code) kind {
	switch {
	case code == codes.ResourceExhausted:
		return shed
	case refusalCodes[code]:
		return refused
	default:
		return transport
	}
}

// fromResponse classifies a Trilean answer.
func fromResponse(r *walv1.WriteToLogResponse) answer {
	switch r.GetDurable() {
	case walv1.Trilean_TRILEAN_TRUE, walv1.Trilean_TRILEAN_FALSE:
		return answer{kind: answered, response: r}
	default: // UNKNOWN, and TRILEAN_UNSPECIFIED which the producer never sends
		return answer{kind: unknown, response: r, message: r.GetMessage()}
	}
}

// fromError classifies a failed call by its status and the status's details.
func fromError(err error) answer {
	st := status.Convert(err)
	a := answer{kind: kindOfCode(st.Code()), code: st.Code(), message: st.Message()}
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.BadRequest:
			if v := d.GetFieldViolations(); len(v) > 0 && a.field == "" {
				a.field = v[0].GetField()
			}
		case *errdetails.RetryInfo:
			if d.GetRetryDelay() != nil {
				a.retryAfter = d.GetRetryDelay().AsDuration()
			}
		}
	}
	return a
}

// fromWriteResult classifies one write's result of a batch, which carries its refusal's field
// and wait itself since a batch result has no status details.
func fromWriteResult(r *walv1.WriteResult) answer {
	code := codes.Code(r.GetCode())
	if code == codes.OK {
		if r.GetResponse() == nil {
			return answer{kind: unknown, message: "the batch result holds no response"}
		}
		return fromResponse(r.GetResponse())
	}
	return answer{
		kind:       kindOfCode(code),
		code:       code,
		message:    r.GetError(),
		field:      r.GetField(),
		retryAfter: time.Duration(r.GetRetryAfterMillis()) * time.Millisecond,
	}
}
