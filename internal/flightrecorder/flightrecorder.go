// Package flightrecorder keeps the last moments of the process's Go execution trace
// in memory and serves them over HTTP. A trace started when someone notices a stall
// (/debug/pprof/trace) begins after the stall did; the flight recorder's window holds
// what led up to it.
package flightrecorder

import (
	"fmt"
	"net/http"
	"runtime/trace"
	"sync"
	"time"
)

// Path is where the apiserver and the hollow nodes serve the recorder's window, beside
// Go's other profiles (and under their authorization).
const Path = "/debug/pprof/flightrecorder"

// maxBytes bounds the window's size: a few seconds of 1,000 hollow kubelets' trace run
// to tens of megabytes, and the window is held in memory.
const maxBytes = 512 << 20

// Recorder is a running flight recorder. The runtime allows one per process.
type Recorder struct {
	fr *trace.FlightRecorder
	mu sync.Mutex // the runtime allows one WriteTo at a time
}

// Start starts recording a moving window of at least window of the process's
// execution trace. Tracing costs the process a few percent of its CPU while it runs.
func Start(window time.Duration) (*Recorder, error) {
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: window, MaxBytes: maxBytes})
	if err := fr.Start(); err != nil {
		return nil, fmt.Errorf("starting the flight recorder: %w", err)
	}
	return &Recorder{fr: fr}, nil
}

// Stop stops recording.
func (r *Recorder) Stop() { r.fr.Stop() }

// ServeHTTP answers with the window as a Go execution trace (`go tool trace`), as
// /debug/pprof/trace answers with one taken from now on.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="flightrecorder"`)
	r.mu.Lock()
	defer r.mu.Unlock()
	// Only the writer can fail here (the recorder runs, one WriteTo at a time), and
	// then the client has gone.
	_, _ = r.fr.WriteTo(w)
}
