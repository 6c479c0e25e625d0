// Package dns is the cluster DNS server: it answers for the cluster domain as the
// Kubernetes DNS-based service discovery specification says, the way CoreDNS's
// kubernetes plugin does (services, headless endpoints, SRV for ports, ExternalName
// CNAMEs, PTR for cluster addresses, pod names in "insecure" mode), from an index that
// informers on Namespaces, Services and EndpointSlices keep current. Every other name,
// and reverse names of addresses that are not the cluster's, go to the resolvers of a
// resolv.conf.
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	miekg "github.com/miekg/dns"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Defaults of the command's flags.
const (
	DefaultListen             = "0.0.0.0:53"
	DefaultClusterDomain      = "cluster.local"
	DefaultTTL                = 5
	DefaultHealthPort         = 8080
	DefaultUpstreamResolvConf = "/etc/resolv.conf"
)

// maxTTL is the longest TTL accepted, as CoreDNS's kubernetes plugin accepts.
const maxTTL = 3600

// Options configure the server.
type Options struct {
	// Listen is the address served over both UDP and TCP, e.g. "0.0.0.0:53".
	Listen string
	// ClusterDomain is the zone answered from the cluster, e.g. "cluster.local".
	ClusterDomain string
	// TTL of every answer from the cluster, and of negative answers, in seconds.
	TTL uint32
	// HealthAddr serves /health and /ready over HTTP; "" serves neither.
	HealthAddr string
	// UpstreamResolvConf names the resolv.conf whose nameservers get every other query;
	// "" forwards nothing (such queries fail with SERVFAIL).
	UpstreamResolvConf string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// Server is a running DNS server. Stop it by cancelling the context given to Start.
type Server struct {
	zone      string
	ttl       uint32
	idx       *index
	hasSynced func() bool
	fwd       *forwarder
	probe     string
	log       *slog.Logger
	baseCtx   context.Context

	udpConn  net.PacketConn
	tcpLn    net.Listener
	healthLn net.Listener

	wg      sync.WaitGroup
	errOnce sync.Once
	err     error
}

// Run serves DNS for the cluster of cfg until ctx ends. listening, when set, is called
// once the listeners are bound, with their address: the bundle publishes it as the
// kube-dns Service.
func Run(ctx context.Context, cfg *rest.Config, opts Options, listening func(ctx context.Context, addr net.Addr) error) error {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "coredns/mizzen"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	s, err := Start(ctx, client, opts)
	if err != nil {
		return err
	}
	s.log.Info("serving DNS", "listen", s.Addr(), "zone", s.zone)
	if listening != nil {
		if err := listening(ctx, s.udpConn.LocalAddr()); err != nil {
			return err
		}
	}
	return s.Wait()
}

// Start binds the listeners, starts the informers and serves until ctx ends.
func Start(ctx context.Context, client kubernetes.Interface, opts Options) (*Server, error) {
	zone := strings.ToLower(miekg.Fqdn(strings.TrimSpace(opts.ClusterDomain)))
	if zone == "." {
		return nil, errors.New("a cluster domain is required")
	}
	if _, ok := miekg.IsDomainName(zone); !ok {
		return nil, fmt.Errorf("cluster domain %q is not a domain name", opts.ClusterDomain)
	}
	if opts.TTL > maxTTL {
		return nil, fmt.Errorf("TTL %d is over the %d seconds CoreDNS allows", opts.TTL, maxTTL)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var upstreams []string
	if opts.UpstreamResolvConf != "" {
		var err error
		if upstreams, err = upstreamsFromResolvConf(opts.UpstreamResolvConf); err != nil {
			return nil, err
		}
	}

	s := &Server{zone: zone, ttl: opts.TTL, idx: newIndex(zone), log: log, baseCtx: ctx, probe: loopProbeName()}
	factory, hasSynced, err := newInformers(client, s.idx)
	if err != nil {
		return nil, err
	}
	s.hasSynced = hasSynced

	if err := s.listen(opts.Listen, opts.HealthAddr); err != nil {
		return nil, err
	}
	listen, _ := netip.ParseAddrPort(s.udpConn.LocalAddr().String())
	s.fwd = newForwarder(withoutSelf(upstreams, listen, localAddrs(), log))
	if opts.UpstreamResolvConf != "" && len(s.fwd.upstreams) == 0 {
		log.Warn("no upstream resolver left to forward to: names outside the cluster will fail", "resolvConf", opts.UpstreamResolvConf)
	}

	factory.Start(ctx.Done())
	s.wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown() // waits for the informers' goroutines
	})
	s.serve(ctx)
	s.checkLoop(ctx)
	return s, nil
}

// listen binds UDP and TCP on one port (the UDP one when the port is 0) and the health port.
func (s *Server) listen(addr, healthAddr string) error {
	if addr == "" {
		addr = DefaultListen
	}
	var err error
	for range 10 {
		if s.udpConn, err = net.ListenPacket("udp", addr); err != nil {
			return fmt.Errorf("listening on UDP %s: %w", addr, err)
		}
		tcpAddr := addr
		if host, port, _ := net.SplitHostPort(addr); port == "0" {
			_, udpPort, _ := net.SplitHostPort(s.udpConn.LocalAddr().String())
			tcpAddr = net.JoinHostPort(host, udpPort)
		}
		if s.tcpLn, err = net.Listen("tcp", tcpAddr); err == nil {
			break
		}
		_ = s.udpConn.Close()
		if !strings.HasSuffix(addr, ":0") {
			return fmt.Errorf("listening on TCP %s: %w", tcpAddr, err)
		}
	}
	if err != nil {
		return fmt.Errorf("listening on TCP beside UDP %s: %w", addr, err)
	}
	if healthAddr != "" {
		if s.healthLn, err = net.Listen("tcp", healthAddr); err != nil {
			_ = s.udpConn.Close()
			_ = s.tcpLn.Close()
			return fmt.Errorf("listening for health checks on %s: %w", healthAddr, err)
		}
	}
	return nil
}

func (s *Server) serve(ctx context.Context) {
	udp := &miekg.Server{PacketConn: s.udpConn, Handler: s}
	tcp := &miekg.Server{Listener: s.tcpLn, Handler: s}
	servers := []*miekg.Server{udp, tcp}
	for _, srv := range servers {
		s.wg.Go(func() {
			if err := srv.ActivateAndServe(); err != nil && ctx.Err() == nil {
				s.fail(err)
			}
		})
	}
	var health *http.Server
	if s.healthLn != nil {
		health = &http.Server{Handler: s.healthHandler(), ReadHeaderTimeout: 5 * time.Second}
		s.wg.Go(func() {
			if err := health.Serve(s.healthLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.fail(err)
			}
		})
	}
	s.wg.Go(func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for _, srv := range servers {
			// A server not yet started refuses to shut down; closing its socket stops it.
			if err := srv.ShutdownContext(shutdownCtx); err != nil {
				_ = s.udpConn.Close()
				_ = s.tcpLn.Close()
			}
		}
		if health != nil {
			_ = health.Shutdown(shutdownCtx)
		}
	})
}

func (s *Server) fail(err error) {
	s.errOnce.Do(func() { s.err = err })
	s.log.Error("DNS server stopped serving", "err", err)
}

// Wait blocks until the server has stopped and returns why, if not for its context.
func (s *Server) Wait() error {
	s.wg.Wait()
	return s.err
}

// Addr is the address served over UDP and TCP.
func (s *Server) Addr() string { return s.udpConn.LocalAddr().String() }

// HealthAddr is the address serving /health and /ready, "" when none.
func (s *Server) HealthAddr() string {
	if s.healthLn == nil {
		return ""
	}
	return s.healthLn.Addr().String()
}

// healthHandler serves CoreDNS's health endpoints: /health is OK while the process
// serves, /ready once the informers have delivered their first lists (until then a 503
// naming the part not ready, as CoreDNS's ready plugin names its plugins).
func (s *Server) healthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("OK"))
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if !s.hasSynced() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("kubernetes"))
			return
		}
		_, _ = w.Write([]byte("OK"))
	})
	return mux
}

// checkLoop sends the loop probe upstream once; ServeDNS notices it coming back.
func (s *Server) checkLoop(ctx context.Context) {
	if len(s.fwd.upstreams) == 0 {
		return
	}
	s.wg.Go(func() {
		m := new(miekg.Msg)
		m.SetQuestion(s.probe, miekg.TypeHINFO)
		_, _ = s.fwd.exchange(ctx, m)
	})
}

// ServeDNS answers one query: from the cluster for the cluster zone and the reverse
// names of cluster addresses, from upstream for the rest.
func (s *Server) ServeDNS(w miekg.ResponseWriter, req *miekg.Msg) {
	_, isTCP := w.RemoteAddr().(*net.TCPAddr)
	reply := s.handle(s.baseCtx, req)
	fit(reply, req, isTCP)
	if err := w.WriteMsg(reply); err != nil {
		s.log.Debug("writing a DNS reply failed", "err", err)
	}
}

func (s *Server) handle(ctx context.Context, req *miekg.Msg) *miekg.Msg {
	reply := new(miekg.Msg)
	reply.SetReply(req)
	reply.RecursionAvailable = true
	if len(req.Question) != 1 {
		reply.Rcode = miekg.RcodeFormatError
		return reply
	}
	q := req.Question[0]
	qname := strings.ToLower(q.Name)

	if qname == s.probe {
		if !s.fwd.looped.Swap(true) {
			s.log.Error("forwarding loop detected: the upstream resolvers send queries back to this server; forwarding stopped",
				"upstreams", s.fwd.upstreams)
		}
		reply.Rcode = miekg.RcodeServerFailure
		return reply
	}

	if p, ok := parseName(qname, s.zone); ok {
		switch {
		case q.Qclass != miekg.ClassINET:
			reply.Rcode = miekg.RcodeRefused // the cluster's records are all class IN
		case !s.hasSynced():
			reply.Rcode = miekg.RcodeServerFailure // no answer yet beats a wrong NXDOMAIN
		default:
			s.answerCluster(ctx, reply, q, qname, p)
		}
		return reply
	}
	if q.Qclass == miekg.ClassINET && q.Qtype == miekg.TypePTR && isReverseName(qname) && s.hasSynced() && s.answerPTR(reply, q, qname) {
		return reply
	}

	resp, err := s.fwd.exchange(ctx, req)
	if err != nil {
		s.log.Debug("forwarding failed", "name", q.Name, "type", miekg.TypeToString[q.Qtype], "err", err)
		reply.Rcode = miekg.RcodeServerFailure
		return reply
	}
	resp.Id = req.Id
	return resp
}

// fit makes a reply fit the asker's buffer: the EDNS0 size it advertised, or 512 bytes
// over UDP without EDNS0, setting the TC bit when records had to go.
func fit(reply, req *miekg.Msg, isTCP bool) {
	size := miekg.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = max(int(opt.UDPSize()), miekg.MinMsgSize)
		if reply.IsEdns0() == nil {
			reply.SetEdns0(opt.UDPSize(), false)
		}
	} else if o := reply.IsEdns0(); o != nil {
		// The asker speaks no EDNS0; an upstream reply must not carry it back.
		reply.Extra = removeOPT(reply.Extra)
	}
	if isTCP {
		size = miekg.MaxMsgSize
	}
	reply.Truncate(size)
}

func removeOPT(rrs []miekg.RR) []miekg.RR {
	out := rrs[:0]
	for _, rr := range rrs {
		if rr.Header().Rrtype != miekg.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}
