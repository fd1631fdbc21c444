// Command conformance-runner runs one plan of the client conformance suite through the Go
// library (clients/conformance/README.md): the plan on standard input, one result line per call
// on standard output as each ends, logs on standard error. It checks nothing itself.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	wal "example.invalid/wal/clients/go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-runner:", err)
		os.Exit(1)
	}
}

func run() error {
	var p plan
	if err := json.NewDecoder(os.Stdin).Decode(&p); err != nil {
		return fmt.Errorf("reading the plan: %w", err)
	}
	var opts wal.Options
	if p.TLS != nil {
		opts.TLS = &wal.TLSFiles{CAFile: p.TLS.CA, CertFile: p.TLS.Certificate, KeyFile: p.TLS.Key, ServerName: p.TLS.Domain}
	}
	client, err := wal.New(p.Producers, opts)
	if err != nil {
		return err
	}
	defer client.Close()
	out := &printer{}
	for i, s := range p.Steps {
		if err := runStep(client, out, i, s); err != nil {
			return fmt.Errorf("step %d (%s): %w", i, s.Op, err)
		}
	}
	return out.err
}

func runStep(client *wal.Client, out *printer, i int, s step) error {
	switch s.Op {
	case "write":
		return runWrites(client, out, i, s)
	case "transaction":
		ctx, cancel, start := begin(s)
		defer cancel()
		items := make([]wal.Item, len(s.Items))
		for k, it := range s.Items {
			items[k] = wal.Item{Payload: []byte(it.Payload)}
		}
		r, err := client.Transaction(ctx, s.Namespace, s.TransactionID, items, s.Chunk)
		return out.print(report(i, 0, start, r, err))
	case "commit":
		ctx, cancel, start := begin(s)
		defer cancel()
		r, err := client.Commit(ctx, s.Namespace, s.TransactionID, s.ItemCount)
		return out.print(report(i, 0, start, r, err))
	case "abort":
		ctx, cancel, start := begin(s)
		defer cancel()
		err := client.Abort(ctx, s.Namespace, s.TransactionID)
		if err == nil {
			return out.print(result{Step: i, Outcome: "OK", ElapsedMillis: since(start)})
		}
		return out.print(report(i, 0, start, wal.Result{}, err))
	}
	return fmt.Errorf("unknown op %q", s.Op)
}

// runWrites makes a write step's writes: all started at once in list order and then awaited,
// or one after another with the pace between two.
func runWrites(client *wal.Client, out *printer, i int, s step) error {
	if !s.Concurrent {
		for k, w := range s.Writes {
			if k > 0 && s.PaceMillis > 0 {
				time.Sleep(time.Duration(s.PaceMillis) * time.Millisecond)
			}
			ctx, cancel, start := begin(s)
			r, err := client.Write(ctx, write(s, w))
			cancel()
			if err := out.print(report(i, k, start, r, err)); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	for k, w := range s.Writes {
		ctx, cancel, start := begin(s)
		pending := client.WriteAsync(ctx, write(s, w))
		wg.Go(func() {
			defer cancel()
			r, err := pending.Wait()
			_ = out.print(report(i, k, start, r, err))
		})
	}
	wg.Wait()
	return out.err
}

func write(s step, w planWrite) wal.Write {
	return wal.Write{
		Namespace:     s.Namespace,
		Payload:       []byte(w.Payload),
		Key:           w.Key,
		IdempotencyID: w.IdempotencyID,
		Delay:         time.Duration(w.DelayMillis) * time.Millisecond,
		Unbatched:     !s.Batch,

		AwaitDestinations: time.Duration(w.AwaitDestinationsMillis) * time.Millisecond,
	}
}

// begin starts one call: its deadline from now, and the time it started.
func begin(s step) (context.Context, context.CancelFunc, time.Time) {
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(time.Duration(s.DeadlineMillis)*time.Millisecond))
	return ctx, cancel, start
}

func since(start time.Time) int64 { return time.Since(start).Milliseconds() }

// report is the result line of a call that returned a Result or an error. An error other than
// a refusal is one this protocol cannot say, so it is logged and reported as the runner's failure.
func report(stepIndex, index int, start time.Time, r wal.Result, err error) result {
	line := result{Step: stepIndex, Index: index, ElapsedMillis: since(start)}
	if refusal, ok := errors.AsType[*wal.RefusedError](err); ok {
		field := refusal.Field
		line.Outcome, line.Code, line.Field = "REFUSED", canonical(refusal.Code), &field
		line.Attempts, line.Message = refusal.Attempts, refusal.Message
		return line
	}
	if err != nil {
		line.Outcome, line.Message = "ERROR", err.Error()
		return line
	}
	line.Outcome, line.EntryID, line.Attempts, line.Message = r.Outcome.String(), r.EntryID, r.Attempts, r.Message
	line.Destinations = r.Destinations
	return line
}

// canonical is a gRPC code's canonical name (INVALID_ARGUMENT), where grpc-go's String says
// InvalidArgument.
func canonical(code codes.Code) string {
	names := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
		codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
		codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
		codes.Unauthenticated: "UNAUTHENTICATED",
	}
	if name, ok := names[code]; ok {
		return name
	}
	return code.String()
}

// printer writes result lines whole, one at a time, as each call ends: the orchestrator counts
// them while the runner runs.
type printer struct {
	mu  sync.Mutex
	err error
}

func (p *printer) print(line result) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if line.Outcome == "ERROR" {
		fmt.Fprintf(os.Stderr, "conformance-runner: step %d index %d: %s\n", line.Step, line.Index, line.Message)
		if p.err == nil {
			p.err = fmt.Errorf("step %d index %d: %s", line.Step, line.Index, line.Message)
		}
		return p.err
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	if _, err := os.Stdout.Write(append(b, '\n')); err != nil && p.err == nil {
		p.err = err
	}
	return p.err
}
