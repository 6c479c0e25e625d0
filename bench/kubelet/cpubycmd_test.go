package main

import (
	"testing"
	"time"
)

func TestCPUBreakdownLargestFirstWithTheRestAsOther(t *testing.T) {
	before := map[string]time.Duration{"containerd": time.Second, "gone": time.Second}
	after := map[string]time.Duration{"containerd": 3 * time.Second, "containerd-shim": time.Second, "tiny": time.Millisecond}
	// 2 s + 1 s + 1 ms counted of 4 s: 999 ms no live process accounts for.
	got := cpuBreakdown(before, after, 4*time.Second, 10)
	if want := "ms per pod by command: containerd 200, containerd-shim 100, other 100"; got != want {
		t.Errorf("cpuBreakdown = %q, want %q", got, want)
	}
}
