package controller

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestConditionsSetInOnePlace pins the rule of "status in one place": the
// conditions and observedGeneration are set only by the derive functions of
// the *_status.go files, from the facts the phases recorded; no phase sets
// one itself.
func TestConditionsSetInOnePlace(t *testing.T) {
	setter := regexp.MustCompile(`\.(SetCondition|SetReconciling|SetStalled|MarkObserved)\(|Status\.ObservedGeneration\s*=|setProgress\(`)
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		checked++
		if strings.HasSuffix(name, "_status.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if setter.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d sets a condition outside the *_status.go files: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d files checked", checked)
	}
}
