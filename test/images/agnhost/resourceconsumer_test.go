package main

import (
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

func TestResourceConsumerRejectsBadQueries(t *testing.T) {
	h := (&consumer{}).handler()
	for _, q := range []string{"/ConsumeCPU", "/ConsumeCPU?millicores=x&durationSec=1", "/ConsumeMem?megabytes=-1&durationSec=1", "/ConsumeCPU?millicores=10"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, q, nil))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", q, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/ConsumeCPU?millicores=0&durationSec=0", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("ConsumeCPU: status %d, want 200", rec.Code)
	}
}

// TestBurnCPUUsesCPU checks that a burn costs CPU time and stays under one core: the
// share itself depends on how busy the machine is.
func TestBurnCPUUsesCPU(t *testing.T) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before := cpu()
	(&consumer{}).burnCPU(200, time.Second)
	used := cpu() - before
	if used < 20*time.Millisecond || used > 900*time.Millisecond {
		t.Errorf("a 200m burn for 1s used %v of CPU", used)
	}
}
