// Package proc stops the processes tests and benchmarks start: politely first, as a
// user's Ctrl-C would, then for good.
package proc

import (
	"os"
	"os/exec"
	"time"
)

// Stop interrupts a started command and waits for it to exit, killing it if it is still
// running after grace. A command that never started or already ended is left alone.
func Stop(cmd *exec.Cmd, grace time.Duration) {
	if cmd == nil || cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}
