// Command pause is the process of every pod sandbox: it holds the pod's namespaces,
// reaps orphaned children (it is PID 1 when the pod shares its PID namespace), and exits
// on SIGINT or SIGTERM. Built statically (CGO_ENABLED=0) and packaged as the sandbox image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
