package wal

import (
	"fmt"
	"time"

	"google.golang.org/grpc"
)

// Options configures a Client. The zero value of every field means the default of
// clients/BEHAVIOUR.md, so Options{} is a client with every default.
type Options struct {
	// Deadline of a call whose context has none. Default 10 s.
	Deadline time.Duration

	// Backoff between retries after UNKNOWN or a transport failure: BackoffBase doubling up to
	// BackoffMax, each wait a uniformly random share of the step (full jitter).
	// Defaults 50 ms and 2 s.
	BackoffBase time.Duration
	BackoffMax  time.Duration

	// DisableBatching sends every write in its own WriteToLog call. Batching is on by default.
	DisableBatching bool
	// Linger is how long a batch's first write waits for others. Default 1 ms.
	Linger time.Duration
	// MaxBatch is the most writes in one WriteToLogBatch call. Default 500; at most 1000,
	// the producer's own limit.
	MaxBatch int
	// MaxBatchesInFlight bounds the batch calls made at once. Default 1, which keeps writes of
	// one key in the order they were made.
	MaxBatchesInFlight int

	// A producer whose call failed in transport is skipped for PauseBase, doubling up to
	// PauseMax while it keeps failing. Defaults 1 s and 30 s.
	PauseBase time.Duration
	PauseMax  time.Duration

	// TransactionChunk is how many items one AppendItems call stages when Transaction is given
	// no chunk size. Default 100.
	TransactionChunk int

	// TLS, when set, connects to every producer with mTLS. Default plaintext.
	TLS *TLSFiles

	// OnResult, when set, is called once for every write that ends, with the outcome's name
	// (TRUE, FALSE, UNKNOWN or REFUSED) and the attempts it took: a hook for metrics, off by
	// default. It must not block.
	OnResult func(outcome string, attempts int)

	// DialOptions are added to the library's own when connecting to each producer.
	DialOptions []grpc.DialOption
}

// The producer refuses a batch of more than this many writes as a whole.
const producerBatchLimit = 1000

// withDefaults fills every zero field with its default and checks the rest.
func (o Options) withDefaults() (Options, error) {
	orDuration := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	orInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	orDuration(&o.Deadline, 10*time.Second)
	orDuration(&o.BackoffBase, 50*time.Millisecond)
	orDuration(&o.BackoffMax, 2*time.Second)
	orDuration(&o.Linger, time.Millisecond)
	orInt(&o.MaxBatch, 500)
	orInt(&o.MaxBatchesInFlight, 1)
	orDuration(&o.PauseBase, time.Second)
	orDuration(&o.PauseMax, 30*time.Second)
	orInt(&o.TransactionChunk, 100)

	switch {
	case o.Deadline < 0, o.BackoffBase < 0, o.Linger < 0, o.PauseBase < 0:
		return o, fmt.Errorf("wal: Options: durations must not be negative")
	case o.BackoffMax < o.BackoffBase:
		return o, fmt.Errorf("wal: Options: BackoffMax %v is below BackoffBase %v", o.BackoffMax, o.BackoffBase)
	case o.PauseMax < o.PauseBase:
		return o, fmt.Errorf("wal: Options: PauseMax %v is below PauseBase %v", o.PauseMax, o.PauseBase)
	case o.MaxBatch < 1 || o.MaxBatch > producerBatchLimit:
		return o, fmt.Errorf("wal: Options: MaxBatch %d is not within 1 to %d", o.MaxBatch, producerBatchLimit)
	case o.MaxBatchesInFlight < 1:
		return o, fmt.Errorf("wal: Options: MaxBatchesInFlight %d is below 1", o.MaxBatchesInFlight)
	case o.TransactionChunk < 1:
		return o, fmt.Errorf("wal: Options: TransactionChunk %d is below 1", o.TransactionChunk)
	}
	return o, nil
}
