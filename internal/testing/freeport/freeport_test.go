package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestGetHandsOutDistinctBindablePortsOutsideTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for i := 0; i < 50; i++ {
		port := Get(t)
		if port < first || port > last {
			t.Fatalf("port %d is outside %d-%d", port, first, last)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", port, err)
		}
		// Kept open, so the next Get must find another.
		defer l.Close()
	}
}

// TestGetSkipsAPortAnotherProcessWasHandedOut: a port reserved by another test process
// (its reservation held here, as that process would hold it) is not handed out, even
// though nothing listens on it yet.
func TestGetSkipsAPortAnotherProcessWasHandedOut(t *testing.T) {
	Get(t) // sets next
	mu.Lock()
	taken := next
	mu.Unlock()
	r, err := reserve(taken)
	if err != nil {
		t.Fatalf("reserving %d: %v", taken, err)
	}
	defer r.Close()
	if port := Get(t); port == taken {
		t.Fatalf("port %d handed out though another process holds it", port)
	}
}
