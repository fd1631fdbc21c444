package wal

import (
	"fmt"

	"google.golang.org/grpc/codes"

	"example.invalid/wal/clients/go/walv1"
)

// Outcome is the platform's Trilean: what a write's answer says about the entry.
type Outcome int

const (
	// True: the entry is on the namespace's queue and will be delivered at least once.
	True Outcome = iota + 1
	// False: the last attempt definitely stored nothing. The library never retries it; the
	// caller may, with the same idempotency id or a new one.
	False
	// Unknown: the entry may or may not be stored; returned only when the deadline ended while
	// the library was still retrying.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case True:
		return "TRUE"
	case False:
		return "FALSE"
	case Unknown:
		return "UNKNOWN"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the answer to a write, or to a transaction's commit.
type Result struct {
	Outcome Outcome
	// EntryID is the entry's id: the idempotency id every attempt carried (for a commit, the id
	// of its commit marker, as the producer names it).
	EntryID string
	// Attempts is how many calls the answer took, at least 1.
	Attempts int
	// Message is the producer's reason when the outcome is not True.
	Message string
	// Destinations: for a write with AwaitDestinations that was stored, each destination of the
	// namespace by name, and what it had done with the entry when the producer answered:
	// "applied", "dead_lettered" or "pending". Nil otherwise.
	Destinations map[string]string
}

// destinationStates names each DestinationState as Result.Destinations does.
var destinationStates = map[walv1.DestinationState]string{
	walv1.DestinationState_DESTINATION_STATE_APPLIED:       "applied",
	walv1.DestinationState_DESTINATION_STATE_DEAD_LETTERED: "dead_lettered",
}

// destinationsOf is a response's destinations as Result.Destinations has them.
func destinationsOf(r *walv1.WriteToLogResponse) map[string]string {
	outcomes := r.GetDestinations()
	if len(outcomes) == 0 {
		return nil
	}
	named := make(map[string]string, len(outcomes))
	for _, d := range outcomes {
		state, known := destinationStates[d.GetState()]
		if !known {
			state = "pending"
		}
		named[d.GetDestination()] = state
	}
	return named
}

// RefusedError is the one error type of a refusal: the request was wrong or not allowed, or
// every attempt was shed until the deadline (Code RESOURCE_EXHAUSTED). Nothing was stored, and
// the library did not retry it. Use errors.As to get it.
type RefusedError struct {
	Code codes.Code
	// Field is the request field the refusal is about (namespace, payload,
	// lifecycle.delay_millis, target.settings_json, transaction_id, item_count...), empty when
	// the producer named none.
	Field   string
	Message string
	// Attempts is how many calls were made, at least 1.
	Attempts int
}

func (e *RefusedError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("wal: refused with %v: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("wal: refused with %v (field %s): %s", e.Code, e.Field, e.Message)
}
