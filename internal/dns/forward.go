package dns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	miekg "github.com/miekg/dns"
)

// upstreamTimeout bounds one exchange with one upstream resolver, and forwardTimeout
// the whole of one forwarded question.
const (
	upstreamTimeout = 2 * time.Second
	forwardTimeout  = 5 * time.Second
)

// errNoUpstream is returned when there is nothing to forward to.
var errNoUpstream = errors.New("no upstream resolver to forward to")

// forwarder sends questions outside the cluster zone to the resolvers of a resolv.conf,
// in order, over UDP and then TCP when the UDP answer was truncated.
type forwarder struct {
	upstreams []string // host:port
	udp, tcp  *miekg.Client
	// looped is set once a loop back to this server has been detected; forwarding stops.
	looped atomic.Bool
}

func newForwarder(upstreams []string) *forwarder {
	return &forwarder{
		upstreams: upstreams,
		udp:       &miekg.Client{Net: "udp", Timeout: upstreamTimeout},
		tcp:       &miekg.Client{Net: "tcp", Timeout: upstreamTimeout},
	}
}

// exchange asks the upstream resolvers in turn and returns the first answer.
func (f *forwarder) exchange(ctx context.Context, req *miekg.Msg) (*miekg.Msg, error) {
	if f.looped.Load() {
		return nil, errors.New("forwarding stopped: a loop back to this server was detected")
	}
	if len(f.upstreams) == 0 {
		return nil, errNoUpstream
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	var lastErr error
	for _, u := range f.upstreams {
		resp, _, err := f.udp.ExchangeContext(ctx, req, u)
		if err == nil && resp.Truncated {
			resp, _, err = f.tcp.ExchangeContext(ctx, req, u)
		}
		if err == nil {
			return resp, nil
		}
		lastErr = fmt.Errorf("upstream %s: %w", u, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// upstreamsFromResolvConf reads the nameservers of a resolv.conf as host:port addresses.
// Beyond resolv.conf(5), a nameserver may carry a port ("127.0.0.1:5353", "[::1]:5353").
func upstreamsFromResolvConf(path string) ([]string, error) {
	cfg, err := miekg.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading upstream resolvers: %w", err)
	}
	port := cfg.Port
	if port == "" {
		port = "53"
	}
	out := make([]string, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			out = append(out, ap.String())
			continue
		}
		out = append(out, net.JoinHostPort(s, port))
	}
	return out, nil
}

// withoutSelf drops the upstreams that are this server itself: its listen address, or,
// when it listens on every address, any address of this host on its port (loopback
// included). Forwarding to them would loop.
func withoutSelf(upstreams []string, listen netip.AddrPort, localAddrs []netip.Addr, log *slog.Logger) []string {
	var out []string
	for _, u := range upstreams {
		host, portText, err := net.SplitHostPort(u)
		if err != nil {
			continue
		}
		a, err := netip.ParseAddr(host)
		port, perr := strconv.Atoi(portText)
		if err != nil || perr != nil {
			log.Warn("ignoring an upstream resolver that is not an address", "upstream", u)
			continue
		}
		if port == int(listen.Port()) && isSelf(a.WithZone("").Unmap(), listen.Addr().Unmap(), localAddrs) {
			log.Warn("ignoring an upstream resolver that is this server: forwarding to it would loop", "upstream", u)
			continue
		}
		out = append(out, u)
	}
	return out
}

func isSelf(a, listen netip.Addr, localAddrs []netip.Addr) bool {
	if a == listen {
		return true
	}
	if !listen.IsUnspecified() {
		return false // another address on this host is another socket, e.g. systemd-resolved's 127.0.0.53
	}
	if a.IsLoopback() || a.IsUnspecified() {
		return true
	}
	for _, l := range localAddrs {
		if l.Unmap() == a {
			return true
		}
	}
	return false
}

// localAddrs lists the addresses of this host's interfaces.
func localAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out
}

// loopProbeName is a random name this server sends upstream once at start, as CoreDNS's
// loop plugin does: if it ever arrives back as a query, forwarding goes around in a circle.
func loopProbeName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + ".mizzen-dns-loop-check."
}
