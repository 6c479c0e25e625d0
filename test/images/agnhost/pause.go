package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// runPause sleeps until SIGTERM or SIGINT and then exits 0, as a container that only
// holds a pod open should.
func runPause(args []string, stdout, stderr io.Writer) int {
	if err := newFlags("pause", stderr).Parse(args); err != nil {
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Fprintln(stdout, "Paused")
	sig := <-sigs
	fmt.Fprintf(stdout, "Shutting down after receiving signal: %s.\n", sig)
	return 0
}
