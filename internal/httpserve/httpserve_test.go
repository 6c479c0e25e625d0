package httpserve

import (
	"net"
	"net/http"
	"testing"
)

// TestStopFreesThePort: a second run can listen on the port as soon as the first
// run's stop returns, even when stop comes before Serve took the listener over.
func TestStopFreesThePort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	for range 3 {
		stop := Serve(&http.Server{Handler: http.NotFoundHandler()}, ln, func(err error) { t.Error(err) })
		stop()
		if ln, err = net.Listen("tcp", addr); err != nil {
			t.Fatalf("listening again on %s after stop: %v", addr, err)
		}
	}
	_ = ln.Close()
}
