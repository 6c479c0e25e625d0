package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// runResourceConsumer serves upstream's resource-consumer API on --port (8080): POST
// (or GET) /ConsumeCPU?millicores=N&durationSec=S burns N millicores for S seconds,
// /ConsumeMem?megabytes=N&durationSec=S holds N MiB for S seconds; requests add up.
// --cpu-millicores with --duration starts a burn at once, for images run without a
// client to call them.
func runResourceConsumer(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("resource-consumer", stderr)
	port := fs.Int("port", 8080, "port to serve on")
	millicores := fs.Int("cpu-millicores", 0, "millicores to burn from start")
	duration := fs.Duration("duration", time.Hour, "how long the --cpu-millicores burn lasts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c := &consumer{}
	if *millicores > 0 {
		go c.burnCPU(*millicores, *duration)
	}
	fmt.Fprintf(stdout, "resource-consumer serving on port %d\n", *port)
	if err := http.ListenAndServe(fmt.Sprintf(":%d", *port), c.handler()); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// consumer burns CPU and holds memory on request.
type consumer struct {
	mu   sync.Mutex
	held [][]byte
}

// cpuSlice is the period within which a burn spins for its share and sleeps the rest.
const cpuSlice = 100 * time.Millisecond

// burnCPU spins for millicores/1000 of every slice until d has passed.
func (c *consumer) burnCPU(millicores int, d time.Duration) {
	busy := cpuSlice * time.Duration(millicores) / 1000
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		sliceStart := time.Now()
		for time.Since(sliceStart) < busy {
		}
		time.Sleep(cpuSlice - time.Since(sliceStart))
	}
}

// holdMem allocates and touches mb MiB and keeps it for d.
func (c *consumer) holdMem(mb int, d time.Duration) {
	chunk := make([]byte, mb<<20)
	for i := 0; i < len(chunk); i += 4096 {
		chunk[i] = 1
	}
	c.mu.Lock()
	c.held = append(c.held, chunk)
	c.mu.Unlock()
	time.Sleep(d)
	c.mu.Lock()
	for i, h := range c.held {
		if &h[0] == &chunk[0] {
			c.held = append(c.held[:i], c.held[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
}

func (c *consumer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ConsumeCPU", func(w http.ResponseWriter, r *http.Request) {
		n, d, ok := amountAndDuration(w, r, "millicores")
		if !ok {
			return
		}
		go c.burnCPU(n, d)
		fmt.Fprintln(w, "ConsumeCPU")
		fmt.Fprintln(w, n, "millicores")
		fmt.Fprintln(w, int(d.Seconds()), "durationSec")
	})
	mux.HandleFunc("/ConsumeMem", func(w http.ResponseWriter, r *http.Request) {
		n, d, ok := amountAndDuration(w, r, "megabytes")
		if !ok {
			return
		}
		go c.holdMem(n, d)
		fmt.Fprintln(w, "ConsumeMem")
		fmt.Fprintln(w, n, "megabytes")
		fmt.Fprintln(w, int(d.Seconds()), "durationSec")
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	return mux
}

// amountAndDuration reads the query's amount parameter and durationSec, answering 400
// when either is missing or not a non-negative integer.
func amountAndDuration(w http.ResponseWriter, r *http.Request, amount string) (int, time.Duration, bool) {
	q := r.URL.Query()
	n, err1 := strconv.Atoi(q.Get(amount))
	sec, err2 := strconv.Atoi(q.Get("durationSec"))
	if err1 != nil || err2 != nil || n < 0 || sec < 0 {
		http.Error(w, fmt.Sprintf("%s and durationSec must be non-negative integers", amount), http.StatusBadRequest)
		return 0, 0, false
	}
	return n, time.Duration(sec) * time.Second, true
}
