package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNetexecHandlers(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hostname" {
			w.Write([]byte("backend-pod"))
			return
		}
		http.NotFound(w, r)
	}))
	defer backend.Close()
	backendHost, backendPort, _ := net.SplitHostPort(strings.TrimPrefix(backend.URL, "http://"))

	tests := []struct {
		name     string
		url      string
		udpDown  bool
		wantCode int
		wantBody string // exact body, unless wantJSON is set
		wantJSON map[string]any
	}{
		{name: "hostname", url: "/hostname", wantCode: 200, wantBody: "pod-a"},
		{name: "hostName alias", url: "/hostName", wantCode: 200, wantBody: "pod-a"},
		{name: "echo", url: "/echo?msg=hello%20there", wantCode: 200, wantBody: "hello there"},
		{name: "echo with code", url: "/echo?msg=teapot&code=418", wantCode: 418, wantBody: "teapot"},
		{name: "echo with bad code", url: "/echo?msg=x&code=abc", wantCode: 400, wantBody: "invalid code \"abc\"\n"},
		{name: "healthz", url: "/healthz", wantCode: 200, wantBody: ""},
		{name: "healthz without UDP server", url: "/healthz", udpDown: true, wantCode: 412, wantBody: "UDP server is not running\n"},
		{name: "clientip", url: "/clientip", wantCode: 200, wantBody: "192.0.2.1:1234"},
		{name: "shell", url: "/shell?shellCommand=echo%20hi", wantCode: 200, wantJSON: map[string]any{"output": "hi\n"}},
		{name: "shell cmd alias", url: "/shell?cmd=printf%20x", wantCode: 200, wantJSON: map[string]any{"output": "x"}},
		{name: "shell failure", url: "/shell?shellCommand=exit%203", wantCode: 417, wantJSON: map[string]any{"output": "", "error": "exit status 3"}},
		{name: "shell without command", url: "/shell", wantCode: 400, wantBody: "shellCommand is required\n"},
		{name: "dial http", url: "/dial?request=hostname&protocol=http&tries=2&host=" + backendHost + "&port=" + backendPort,
			wantCode: 200, wantJSON: map[string]any{"responses": []any{"backend-pod", "backend-pod"}, "errors": []any{}}},
		{name: "dial without request", url: "/dial?host=h&port=1", wantCode: 400, wantBody: "request, host and port are required\n"},
		{name: "dial bad protocol", url: "/dial?request=x&host=h&port=1&protocol=sctp", wantCode: 400, wantBody: "unsupported protocol \"sctp\"\n"},
		{name: "dial bad tries", url: "/dial?request=x&host=h&port=1&tries=0", wantCode: 400, wantBody: "invalid tries \"0\"\n"},
		{name: "bytes", url: "/bytes?size=5", wantCode: 200, wantBody: "\x00\x00\x00\x00\x00"},
		{name: "bytes without size", url: "/bytes", wantCode: 400, wantBody: "size must be a number of bytes\n"},
		{name: "exit with bad code", url: "/exit?code=200", wantCode: 400, wantBody: "invalid exit code \"200\": want an integer in [0, 127]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &netexec{hostname: "pod-a", shell: "/bin/sh", dialTimeout: 5 * time.Second,
				exit: func(code int) { t.Errorf("unexpected exit %d", code) }}
			n.udpReady.Store(!tt.udpDown)
			req := httptest.NewRequest(http.MethodGet, tt.url, nil)
			req.RemoteAddr = "192.0.2.1:1234"
			rec := httptest.NewRecorder()
			n.handler().ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Errorf("status %d, want %d (body %q)", rec.Code, tt.wantCode, rec.Body.String())
			}
			if tt.wantJSON == nil {
				if rec.Body.String() != tt.wantBody {
					t.Errorf("body %q, want %q", rec.Body.String(), tt.wantBody)
				}
				return
			}
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q is not JSON: %v", rec.Body.String(), err)
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tt.wantJSON)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("body %s, want %s", gotJSON, wantJSON)
			}
		})
	}
}

func TestNetexecDialFailureIs417(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	n := &netexec{hostname: "pod-a", dialTimeout: 2 * time.Second}
	rec := httptest.NewRecorder()
	n.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dial?request=hostname&host=127.0.0.1&port="+itoa(port), nil))
	var got struct{ Responses, Errors []string }
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusExpectationFailed || len(got.Errors) != 1 || len(got.Responses) != 0 {
		t.Errorf("status %d, body %s; want 417 with one error", rec.Code, rec.Body.String())
	}
}

func TestNetexecExitEndsWithCode(t *testing.T) {
	exited := make(chan int, 1)
	n := &netexec{hostname: "pod-a", exit: func(code int) { exited <- code }}
	rec := httptest.NewRecorder()
	n.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/exit?code=42", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	select {
	case code := <-exited:
		if code != 42 {
			t.Errorf("exit code %d, want 42", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit")
	}
}

func TestNetexecUDPCommands(t *testing.T) {
	n := &netexec{hostname: "pod-a"}
	from := &net.UDPAddr{IP: net.ParseIP("192.0.2.7"), Port: 5000}
	for cmd, want := range map[string]string{"hostname": "pod-a", "echo hi there": "hi there", "clientip": "192.0.2.7:5000", "bogus": ""} {
		if got := n.udpReply(cmd, from); got != want {
			t.Errorf("udp %q = %q, want %q", cmd, got, want)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
