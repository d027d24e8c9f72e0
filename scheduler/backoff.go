package scheduler

import (
	"math/rand/v2"
	"time"
)

// RetryBackoff returns the delay before retry number retryTimes+1:
// base·2^retryTimes capped at max, times a uniform factor in
// [1-jitter, 1+jitter]. With the defaults (1s, 1h, 0.25) the first retry
// waits 0.75–1.25 s, the second 1.5–2.5 s.
func RetryBackoff(retryTimes int, base, max time.Duration, jitter float64) time.Duration {
	d := base
	for i := 0; i < retryTimes && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	if jitter > 0 {
		f := 1 + jitter*(2*rand.Float64()-1)
		d = time.Duration(float64(d) * f)
	}
	return d
}

// jittered returns d ± j, uniform.
func jittered(d, j time.Duration) time.Duration {
	if j <= 0 {
		return d
	}
	return d - j + time.Duration(rand.Int64N(int64(2*j)+1))
}
