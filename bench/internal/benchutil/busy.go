package benchutil

import (
	"os/exec"
	"syscall"
)

// Busy starts n processes that each keep one core busy (a shell's empty loop) until the
// returned stop is called or the benchmark process ends. A benchmark starts them for
// its measured phase so that "a busy machine" is the same contention for every side
// and every run, not whatever else happened to run that day. They run in the
// benchmark's session, so with the kernel's autogroup scheduling they compete with the
// measured processes thread against thread.
func Busy(n int) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		cmds = nil
	}
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			stop()
			return nil, err
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}
