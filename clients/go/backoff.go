package wal

import (
	"math/rand/v2"
	"time"
)

// backoff is the wait before retry number step (0 for the first retry) after UNKNOWN or a
// transport failure: full jitter over base doubling up to max, so that many clients retrying
// at once spread out instead of coming back together.
func backoff(base, max time.Duration, step int) time.Duration {
	return jitter(backoffCeiling(base, max, step))
}

// backoffCeiling is the step's upper bound: base << step, at most max (without overflowing).
func backoffCeiling(base, max time.Duration, step int) time.Duration {
	d := base
	for i := 0; i < step && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// shedWait is the wait after RESOURCE_EXHAUSTED that asked for `asked`: that wait plus a random
// share of up to it again, so that writes shed together do not come back together.
func shedWait(asked time.Duration) time.Duration {
	return asked + jitter(asked)
}

// jitter is a uniformly random duration in [0, d].
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}
