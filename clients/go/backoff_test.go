package wal

import (
	"testing"
	"time"
)

func TestBackoffCeilingDoublesFrom50msTo2s(t *testing.T) {
	base, max := 50*time.Millisecond, 2*time.Second
	want := []time.Duration{50, 100, 200, 400, 800, 1600, 2000, 2000}
	for step, w := range want {
		if got := backoffCeiling(base, max, step); got != w*time.Millisecond {
			t.Errorf("step %d: ceiling %v, want %v", step, got, w*time.Millisecond)
		}
	}
	if got := backoffCeiling(base, max, 1000); got != max {
		t.Errorf("step 1000: ceiling %v, want %v (no overflow)", got, max)
	}
}

func TestBackoffIsFullJitterWithinTheStep(t *testing.T) {
	base, max := 50*time.Millisecond, 2*time.Second
	for step := range 10 {
		ceiling := backoffCeiling(base, max, step)
		var low, high bool
		for range 2000 {
			d := backoff(base, max, step)
			if d < 0 || d > ceiling {
				t.Fatalf("step %d: wait %v outside [0, %v]", step, d, ceiling)
			}
			low = low || d < ceiling/4
			high = high || d > ceiling*3/4
		}
		if !low || !high {
			t.Errorf("step %d: waits do not spread over [0, %v]", step, ceiling)
		}
	}
}

func TestShedWaitIsTheAskedWaitPlusUpToItAgain(t *testing.T) {
	asked := 40 * time.Millisecond
	for range 2000 {
		if d := shedWait(asked); d < asked || d > 2*asked {
			t.Fatalf("wait %v outside [%v, %v]", d, asked, 2*asked)
		}
	}
	if d := shedWait(0); d != 0 {
		t.Errorf("no asked wait: %v", d)
	}
}
