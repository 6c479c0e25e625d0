package componentserve

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/testing/freeport"
)

// TestHealth: the health paths answer "ok" while every check passes, and 500 with
// upstream's listing (the reason withheld) when one fails; ?verbose lists them.
func TestHealth(t *testing.T) {
	var leading atomic.Bool
	leading.Store(true)
	addrs := make(chan net.Addr, 1)
	stop, err := Serve(context.Background(), Options{BindAddress: "127.0.0.1", Listening: func(a net.Addr) { addrs <- a }}, Endpoints{
		Client: fake.NewClientset(),
		Checks: []Check{{Name: "leaderElection", Check: func(*http.Request) error {
			if leading.Load() {
				return nil
			}
			return errors.New("lease not renewed")
		}}},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	base := "https://" + (<-addrs).String()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if code, body := get(p); code != 200 || body != "ok" {
			t.Errorf("%s = %d %q, want 200 ok", p, code, body)
		}
	}
	if code, body := get("/healthz?verbose"); code != 200 || body != "[+]ping ok\n[+]leaderElection ok\nhealthz check passed\n" {
		t.Errorf("/healthz?verbose = %d %q", code, body)
	}
	leading.Store(false)
	if code, body := get("/livez"); code != 500 || body != "[+]ping ok\n[-]leaderElection failed: reason withheld\nlivez check failed\n" {
		t.Errorf("/livez with a failing check = %d %q", code, body)
	}
}

// TestStopFreesThePort: the server bundle runs a component again after it loses its
// Lease, and that run listens on the same port as soon as the first one returns.
func TestStopFreesThePort(t *testing.T) {
	port := freeport.Get(t)
	for round := range 3 {
		stop, err := Serve(context.Background(), Options{BindAddress: "127.0.0.1", Port: port}, Endpoints{Client: fake.NewClientset(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatalf("run %d on :%s: %v", round+1, strconv.Itoa(port), err)
		}
		stop()
	}
}
