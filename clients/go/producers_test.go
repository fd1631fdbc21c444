package wal

import (
	"slices"
	"testing"
	"time"
)

// testPool is a pool of n producers without connections, on a clock the test moves.
func testPool(n int) (*pool, *time.Time) {
	now := time.Unix(1_000_000, 0)
	p := &pool{pauseBase: time.Second, pauseMax: 30 * time.Second, now: func() time.Time { return now }}
	for range n {
		p.producers = append(p.producers, &producer{})
	}
	return p, &now
}

func picks(p *pool, n int) []int {
	var got []int
	for range n {
		got = append(got, p.pick(-1))
	}
	return got
}

func TestProducersAreUsedRoundRobin(t *testing.T) {
	p, _ := testPool(3)
	if got := picks(p, 6); !slices.Equal(got, []int{0, 1, 2, 0, 1, 2}) {
		t.Errorf("picks %v", got)
	}
}

func TestAFailedProducerIsSkippedForAPauseThenTriedOnce(t *testing.T) {
	p, now := testPool(3)
	p.report(1, failedCall)
	if got := picks(p, 4); !slices.Equal(got, []int{0, 2, 0, 2}) {
		t.Fatalf("during the pause: picks %v", got)
	}
	*now = now.Add(time.Second)
	// One call tries it again; while that call is out the others skip it.
	if got := picks(p, 3); !slices.Equal(got, []int{0, 1, 2}) && !slices.Equal(got, []int{1, 2, 0}) {
		t.Fatalf("after the pause: picks %v", got)
	}
	if got := picks(p, 4); slices.Contains(got, 1) {
		t.Fatalf("while the probe is out: picks %v", got)
	}
	p.report(1, answeredCall)
	if got := picks(p, 3); !slices.Contains(got, 1) {
		t.Fatalf("after a success: picks %v", got)
	}
}

func TestThePauseDoublesWhileTheProducerKeepsFailingUpTo30s(t *testing.T) {
	p, now := testPool(2)
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for k, w := range want {
		p.report(0, failedCall)
		if got := p.producers[0].pause; got != w*time.Second {
			t.Fatalf("failure %d: pause %v, want %v", k+1, got, w*time.Second)
		}
		// Failures of calls already in flight during the pause do not lengthen it.
		p.report(0, failedCall)
		if got := p.producers[0].pause; got != w*time.Second {
			t.Fatalf("failure %d during its pause: pause %v", k+1, got)
		}
		*now = now.Add(w * time.Second)
	}
}

func TestWhenEveryProducerIsPausedTheOneWhosePauseEndsFirstIsTried(t *testing.T) {
	p, now := testPool(3)
	p.report(0, failedCall)
	*now = now.Add(300 * time.Millisecond)
	p.report(2, failedCall)
	*now = now.Add(300 * time.Millisecond)
	p.report(1, failedCall)
	if got := p.pick(-1); got != 0 {
		t.Errorf("picked %d, want 0", got)
	}
}

func TestARetryAfterATransportFailureGoesToAnotherProducer(t *testing.T) {
	p, _ := testPool(2)
	for range 5 {
		if got := p.pick(0); got != 1 {
			t.Fatalf("avoiding 0: picked %d", got)
		}
	}
	one, _ := testPool(1)
	if got := one.pick(0); got != 0 {
		t.Errorf("a single producer: picked %d", got)
	}
}

func TestACallCutShortByItsCallerFreesTheProbe(t *testing.T) {
	p, now := testPool(2)
	p.report(0, failedCall)
	*now = now.Add(time.Second)
	for p.pick(-1) != 0 {
	}
	p.report(0, inconclusive)
	if got := picks(p, 2); !slices.Contains(got, 0) {
		t.Errorf("picks %v: the producer was never tried again", got)
	}
}
