package benchutil

import (
	"fmt"
	"os"
	"runtime/trace"
	"time"
)

// TraceWindow writes an execution trace of this process, from after to after+length,
// into path; stop ends it early (or never starts it) and waits for the file to be
// written. A trace of a window, not of a whole run: a few seconds already make
// megabytes.
func TraceWindow(path string, after, length time.Duration) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	cancel := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		select {
		case <-time.After(after):
		case <-cancel:
			return
		}
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "trace:", err)
			return
		}
		select {
		case <-time.After(length):
		case <-cancel:
		}
		trace.Stop()
	}()
	return func() { close(cancel); <-done }, nil
}
