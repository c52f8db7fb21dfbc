package main

import (
	"math"
	"slices"
	"time"
)

// Latency summarises the latencies of one run, in milliseconds.
type Latency struct {
	P50  float64 `json:"p50Ms"`
	P95  float64 `json:"p95Ms"`
	P99  float64 `json:"p99Ms"`
	Max  float64 `json:"maxMs"`
	Mean float64 `json:"meanMs"`
}

// RunStats is the outcome of one bounded load run.
type RunStats struct {
	Ops        int           `json:"ops"`
	Errors     int           `json:"errors"`
	Elapsed    time.Duration `json:"-"`
	ElapsedSec float64       `json:"elapsedSec"`
	Throughput float64       `json:"opsPerSec"`
	Latency    Latency       `json:"latency"`
	// FirstError is the first failure, to tell a broken run from a slow one.
	FirstError string `json:"firstError,omitempty"`
}

// summarize computes percentiles (nearest rank) of samples; it sorts samples.
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, d := range samples {
		sum += d
	}
	return Latency{
		P50:  ms(percentile(samples, 50)),
		P95:  ms(percentile(samples, 95)),
		P99:  ms(percentile(samples, 99)),
		Max:  ms(samples[len(samples)-1]),
		Mean: ms(sum / time.Duration(len(samples))),
	}
}

// percentile is the nearest-rank percentile p (0..100] of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// round3 keeps three decimals so the JSON stays readable.
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// ratio is a/b rounded, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}
