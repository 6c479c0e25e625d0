package httpserve

import (
	"context"
	"net"
	"net/http"
	"testing"
)

// TestStopFreesThePort: once stop returns, the same address can be bound again, with
// the context that started the server still live (a component restarted after losing
// its Lease binds its port while the bundle's context goes on).
func TestStopFreesThePort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{Handler: http.NotFoundHandler()}
	stop := Start(context.Background(), srv, func() error { return srv.Serve(ln) }, func(err error) { t.Error(err) })
	stop()
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("after stop, binding %s again: %v", addr, err)
	}
	again.Close()
	stop() // a second stop does nothing
}

// TestContextEndStops: the server also stops when its context ends.
func TestContextEndStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	Start(ctx, srv, func() error { defer close(served); return srv.Serve(ln) }, nil)
	cancel()
	<-served
}
