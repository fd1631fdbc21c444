// Command bench writes at a fixed rate for a few seconds through the Go library and prints the
// writes per second answered TRUE and the latency percentiles.
//
//	bench -namespace go-demo -rate 2000 -duration 5s 127.0.0.1:47311 [more producers...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	wal "example.invalid/wal/clients/go"
)

func main() {
	namespace := flag.String("namespace", "", "the namespace to write to")
	rate := flag.Int("rate", 1000, "writes started per second")
	duration := flag.Duration("duration", 5*time.Second, "how long to write")
	size := flag.Int("size", 100, "payload bytes")
	unbatched := flag.Bool("unbatched", false, "send each write in its own WriteToLog call")
	flag.Parse()
	if *namespace == "" || flag.NArg() == 0 || *rate <= 0 {
		fmt.Fprintln(os.Stderr, "usage: bench -namespace NS [-rate N] [-duration D] [-size B] [-unbatched] PRODUCER...")
		os.Exit(2)
	}
	client, err := wal.New(flag.Args(), wal.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()

	var (
		mu        sync.Mutex
		latencies []time.Duration
		outcomes  = map[string]int{}
		wg        sync.WaitGroup
	)
	payload := make([]byte, *size)
	interval := time.Second / time.Duration(*rate)
	start := time.Now()
	// Open loop: each write starts on its tick, whatever the earlier ones are doing, so a slow
	// answer shows as latency rather than as a lower rate.
	for n := 0; time.Since(start) < *duration; n++ {
		if wait := time.Until(start.Add(time.Duration(n) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		began := time.Now()
		p := client.WriteAsync(context.Background(), wal.Write{
			Namespace: *namespace, Payload: payload, Key: fmt.Sprint(n % 64), Unbatched: *unbatched,
		})
		wg.Go(func() {
			r, err := p.Wait()
			took := time.Since(began)
			outcome := r.Outcome.String()
			if err != nil {
				outcome = "ERROR"
			}
			mu.Lock()
			latencies = append(latencies, took)
			outcomes[outcome]++
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(latencies)
	at := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1))] }
	fmt.Printf("%d writes in %.2fs: %.0f TRUE writes/s; outcomes %v\n",
		len(latencies), elapsed.Seconds(), float64(outcomes["TRUE"])/elapsed.Seconds(), outcomes)
	fmt.Printf("latency p50 %v, p99 %v, max %v\n", at(0.50), at(0.99), latencies[len(latencies)-1])
}
