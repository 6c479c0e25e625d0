package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// serve answers A questions for web.ns.svc.cluster.local. and a CNAME for ext.ns...; every
// other name is NXDOMAIN, as the cluster DNS answers a name of the wrong search domain.
func serve(t *testing.T, network string) string {
	t.Helper()
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch {
		case q.Name == "web.ns.svc.cluster.local." && q.Qtype == dns.TypeA:
			rr, _ := dns.NewRR("web.ns.svc.cluster.local. 30 IN A 10.96.0.10")
			m.Answer = append(m.Answer, rr)
		case q.Name == "ext.ns.svc.cluster.local.":
			rr, _ := dns.NewRR("ext.ns.svc.cluster.local. 30 IN CNAME foo.example.com.")
			m.Answer = append(m.Answer, rr)
		default:
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	var srv *dns.Server
	if network == "tcp" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv = &dns.Server{Listener: l, Handler: handler}
	} else {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv = &dns.Server{PacketConn: pc, Handler: handler}
	}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	if srv.Listener != nil {
		return strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	}
	return strconv.Itoa(srv.PacketConn.LocalAddr().(*net.UDPAddr).Port)
}

func TestDigAsTheProbesRunIt(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("search ns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.0.0.1\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		network string
		args    []string
		want    string
	}{
		{"udp", []string{"+notcp", "+noall", "+answer", "+search", "web", "A"}, "web.ns.svc.cluster.local.\t30\tIN\tA\t10.96.0.10\n"},
		{"tcp", []string{"+tcp", "+noall", "+answer", "+search", "web.ns.svc.cluster.local", "A"}, "web.ns.svc.cluster.local.\t30\tIN\tA\t10.96.0.10\n"},
		{"udp", []string{"+short", "ext.ns.svc.cluster.local", "CNAME"}, "foo.example.com.\n"},
		{"udp", []string{"+notcp", "+noall", "+answer", "web"}, ""}, // no +search: "web." alone is unknown
		{"udp", []string{"+short", "+search", "missing"}, ""},
	} {
		port := serve(t, tc.network)
		var out strings.Builder
		if err := dig(append([]string{"@127.0.0.1", "-p", port}, tc.args...), resolv, &out); err != nil {
			t.Errorf("dig %v: %v", tc.args, err)
			continue
		}
		if out.String() != tc.want {
			t.Errorf("dig %v printed %q, want %q", tc.args, out.String(), tc.want)
		}
	}
}
