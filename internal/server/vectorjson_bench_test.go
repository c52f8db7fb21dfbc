package server

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time (user and system) of the test process: on a
// shared, loaded machine the wall time of a benchmark includes the time it
// waited for a core, its CPU time does not.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// denseVectorBody is the JSON of a search with a dense client vector of
// dims dimensions (random unit-ish values, every one non-zero: what a
// real model's vector looks like on the wire).
func denseVectorBody(b testing.TB, field string, dims int) []byte {
	b.Helper()
	rng := rand.New(rand.NewPCG(31, uint64(dims)))
	vec := make([]float32, dims)
	for i := range vec {
		vec[i] = float32(rng.NormFloat64() / 20)
	}
	body := map[string]any{field: vec}
	if field == "vector" {
		body["query"], body["mode"], body["topK"] = "where does Alice fly in May", "vector", 10
	} else {
		body["content"] = "Alice flies to Lisbon in May"
	}
	out, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkDecodeClientVector: decodeStrict of a search (vector) and an
// add (embedding) body with a dense vector of 384 and 1536 numbers, and of
// the same search without a vector (what the service-embedded side
// decodes), into today's bodies (jsonVector) and the old ones (float32s:
// encoding/json's []float32).
func BenchmarkDecodeClientVector(b *testing.B) {
	for _, dims := range []int{0, 384, 1536} {
		for _, kind := range []string{"search", "add"} {
			if dims == 0 && kind == "add" {
				continue
			}
			field := map[string]string{"search": "vector", "add": "embedding"}[kind]
			body := denseVectorBody(b, field, dims)
			if dims == 0 {
				body = []byte(`{"query":"where does Alice fly in May","mode":"vector","topK":10}`)
			}
			for _, impl := range []string{"jsonVector", "float32s"} {
				target := map[string]func() any{
					"search/jsonVector": func() any { return &searchBody{} }, "search/float32s": oldBody[searchBody](),
					"add/jsonVector": func() any { return &addBody{} }, "add/float32s": oldBody[addBody](),
				}[kind+"/"+impl]
				b.Run(kind+"/"+strconv.Itoa(dims)+"/"+impl, func(b *testing.B) {
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					cpu0 := processCPU(b)
					for b.Loop() {
						if p := decodeStrict(body, target(), ""); p != nil {
							b.Fatal(p.Detail)
						}
					}
					b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}
