package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runStress allocates --mem-total bytes in --mem-alloc-size steps, touching every page so
// the memory is really used, then holds it until SIGTERM: a container that goes over its
// memory limit ends OOMKilled.
func runStress(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("stress", stderr)
	total := fs.String("mem-total", "0", "bytes to allocate in all (suffixes Ki, Mi, Gi)")
	step := fs.String("mem-alloc-size", "4Mi", "bytes allocated per step")
	sleep := fs.Duration("mem-alloc-sleep", time.Millisecond, "pause between steps")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	totalBytes, err := parseBytes(*total)
	if err != nil {
		fmt.Fprintln(stderr, "stress: --mem-total:", err)
		return 2
	}
	stepBytes, err := parseBytes(*step)
	if err != nil || stepBytes <= 0 {
		fmt.Fprintln(stderr, "stress: --mem-alloc-size must be a positive size")
		return 2
	}
	var held [][]byte
	for allocated := int64(0); allocated < totalBytes; allocated += stepBytes {
		chunk := make([]byte, min(stepBytes, totalBytes-allocated))
		for i := 0; i < len(chunk); i += 4096 {
			chunk[i] = 1
		}
		held = append(held, chunk)
		time.Sleep(*sleep)
	}
	fmt.Fprintf(stdout, "allocated %d bytes in %d chunks\n", totalBytes, len(held))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	return 0
}

// parseBytes reads a byte count with an optional binary (Ki, Mi, Gi) or decimal (k, M,
// G) suffix.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		factor int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}}
	factor := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, factor = strings.TrimSuffix(s, u.suffix), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a byte count", s)
	}
	return n * factor, nil
}
