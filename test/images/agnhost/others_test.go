package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestHostnameHandler(t *testing.T) {
	for _, closeConn := range []bool{false, true} {
		rec := httptest.NewRecorder()
		hostnameHandler("web-1", closeConn).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/anything", nil))
		if rec.Code != 200 || rec.Body.String() != "web-1" {
			t.Errorf("close=%v: %d %q, want 200 web-1", closeConn, rec.Code, rec.Body.String())
		}
		if got := rec.Header().Get("Connection") == "close"; got != closeConn {
			t.Errorf("close=%v: Connection header %q", closeConn, rec.Header().Get("Connection"))
		}
	}
}

func TestLivenessHandler(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		after    time.Duration
		wantCode int
	}{
		{0, 200}, {9 * time.Second, 200}, {10 * time.Second, 200}, {11 * time.Second, 500}, {time.Hour, 500},
	}
	for _, tt := range tests {
		now := func() time.Time { return start.Add(tt.after) }
		rec := httptest.NewRecorder()
		livenessHandler(start, 10*time.Second, now).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code != tt.wantCode {
			t.Errorf("after %v: status %d, want %d", tt.after, rec.Code, tt.wantCode)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false}, {"512", 512, false}, {"4Ki", 4096, false}, {"100Mi", 100 << 20, false},
		{"2Gi", 2 << 30, false}, {"3M", 3e6, false}, {"", 0, true}, {"-1", 0, true}, {"12Xi", 0, true},
	}
	for _, tt := range tests {
		got, err := parseBytes(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestDispatchExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"fail"}, 1},
		{[]string{"fail", "7"}, 7},
		{[]string{"fail", "--exit-code", "3"}, 3},
		{[]string{"fail", "many"}, 2},
		{[]string{"no-such-command"}, 2},
		{[]string{"help"}, 0},
		{[]string{"stress", "--mem-total", "1Mi", "--mem-alloc-size", "0"}, 2},
		{[]string{"serve-hostname", "--http=false"}, 2},
		{[]string{"serve-hostname", "--udp"}, 2},
		{[]string{"serve-hostname", "--tcp"}, 2},
		{[]string{"dns-lookup"}, 2},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		if got := dispatch(tt.args, &out, &errOut); got != tt.want {
			t.Errorf("agnhost %v exited %d, want %d (stderr %q)", tt.args, got, tt.want, errOut.String())
		}
	}
}

func TestServeHostnameRawProtocols(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go serveHostnameUDP(pc, "web-2")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go serveHostnameTCP(l, "web-2")

	for _, tt := range []struct{ network, addr string }{{"udp", pc.LocalAddr().String()}, {"tcp", l.Addr().String()}} {
		conn, err := net.DialTimeout(tt.network, tt.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if tt.network == "udp" {
			if _, err := conn.Write([]byte("hi")); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		conn.Close()
		if err != nil || string(buf[:n]) != "web-2" {
			t.Errorf("%s answered %q, %v; want web-2", tt.network, buf[:n], err)
		}
	}
}
