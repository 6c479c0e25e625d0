package runtimestats

import (
	"runtime"
	"testing"
)

// TestRead reads metrics every Go has and one no Go has.
func TestRead(t *testing.T) {
	runtime.GC()
	got := New("/gc/heap/allocs:bytes", "/gc/gogc:percent", "/no/such:metric").Read()
	if len(got) != 3 {
		t.Fatalf("read %d values for 3 names", len(got))
	}
	if got[0] == 0 || got[1] == 0 {
		t.Errorf("bytes allocated %d, GOGC %d: a metric the runtime has read as zero", got[0], got[1])
	}
	if got[2] != 0 {
		t.Errorf("a metric the runtime does not have read as %d", got[2])
	}
}
