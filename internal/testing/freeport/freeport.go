// Package freeport hands tests loopback TCP ports to give to processes they start,
// ports that the kernel will not hand to some other connection in the meantime.
//
// The usual trick, listening on port 0 and closing the listener, returns a port of the
// kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768–60999 by default), the
// same range every outgoing connection's local port comes from. Between the test
// choosing the port and its process binding it, any connect() on the machine (an
// apiserver dialling etcd, a member dialling its peers, another test package) may take
// it, and the process then fails to bind with "address already in use". Ports here come
// from below that range and above the well-known and NodePort ones, so only another
// listener can take them, and each is handed out once per test process. A port handed
// out is also reserved for the rest of the process under an abstract Unix socket name
// (no file to clean up: the kernel drops it when the process ends), which the other
// test processes running at the same time check, so two packages' tests are never
// handed the same port between one's choosing it and its process binding it.
package freeport

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
)

// The range ports are handed out from: above the ports of well-known services and
// Kubernetes' (6443, 10250, 2379, ...), below the NodePort range (30000–32767), which a
// test cluster's proxy may claim on the host, and below the ephemeral range.
const (
	first = 20000
	last  = 29999
)

var (
	mu   sync.Mutex
	next int
	// reserved holds the reservations open for the life of the process.
	reserved []net.Listener
)

// Get returns a loopback TCP port no one listens on, not handed out before in this
// process; it fails the test when none is left.
func Get(t testing.TB) int {
	t.Helper()
	port, err := get()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// MustGet is Get for code without a testing.TB (benchmarks' helpers); it panics when
// no port is left.
func MustGet() int {
	port, err := get()
	if err != nil {
		panic(err)
	}
	return port
}

func get() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	if next == 0 {
		// Test processes of several packages run at once: each starts at its own place
		// in the range, so they rarely try the same ports at the same moment.
		next = first + os.Getpid()*397%(last-first+1)
	}
	for tries := 0; tries <= last-first; tries++ {
		port := next
		next++
		if next > last {
			next = first
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // someone listens there, or holds it
		}
		_ = l.Close()
		r, err := reserve(port)
		if err != nil {
			continue // another test process was handed it
		}
		reserved = append(reserved, r)
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d", first, last)
}

// reserve claims port for this process among the processes that use this package.
func reserve(port int) (net.Listener, error) {
	return net.Listen("unix", "@mizzen-freeport-"+strconv.Itoa(port))
}
