package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Options configure Run.
type Options struct {
	Client   kubernetes.Interface
	NodeName string
	// ClusterCIDR tells pod traffic from other traffic (upstream's --cluster-cidr);
	// invalid when unknown.
	ClusterCIDR netip.Prefix
	// NodePortAddresses is upstream's --nodeport-addresses: CIDRs whose local
	// addresses serve NodePorts (0.0.0.0/0: every local address), or "primary", the
	// node's own IPs from its Node object. Empty means primary, the nftables default.
	NodePortAddresses []string
	MasqueradeAll     bool
	// MinSyncPeriod is the least time between two syncs: changes arriving closer
	// together are written in one batch. SyncPeriod forces a full rewrite.
	MinSyncPeriod time.Duration
	SyncPeriod    time.Duration
	// Writer writes the rules; a Table in the process's namespace when nil.
	Writer Writer
	// HealthzBindAddress serves /healthz and /livez (upstream's 0.0.0.0:10256); empty
	// serves nothing.
	HealthzBindAddress string
	// MetricsBindAddress serves /metrics, /proxyMode, /healthz and /livez over plain
	// HTTP (upstream's 127.0.0.1:10249); empty, "0" or a port of 0 serves nothing.
	MetricsBindAddress string
	// Conntrack clears UDP entries to removed endpoints; Conntrack{} when nil.
	Conntrack ConntrackCleaner
	Log       *slog.Logger
	// serviceHealthHost is where healthCheckNodePorts are bound: every address
	// normally, loopback in tests.
	serviceHealthHost string
}

// Writer writes a ruleset to the kernel; Table is the real one.
type Writer interface {
	Apply(*Ruleset) error
}

// ConntrackCleaner clears the UDP conntrack entries DNATed to the given endpoints;
// Conntrack is the real one.
type ConntrackCleaner interface {
	ClearUDPTo(map[netip.AddrPort]bool) error
}

// DefaultMinSyncPeriod and DefaultSyncPeriod are upstream's nftables defaults.
const (
	DefaultMinSyncPeriod = time.Second
	DefaultSyncPeriod    = 30 * time.Second
)

// serviceProxyLabels selects the Services and EndpointSlices a default proxy handles,
// as upstream's: headless services and those claimed by another proxy are skipped.
const serviceProxyLabels = "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"

// ParseNodePortAddresses checks --nodeport-addresses values.
func ParseNodePortAddresses(values []string) error {
	for _, v := range values {
		if v == "primary" {
			continue
		}
		if _, err := netip.ParsePrefix(v); err != nil {
			return fmt.Errorf("--nodeport-addresses %q: not a CIDR or \"primary\"", v)
		}
	}
	return nil
}

// Run follows Services, EndpointSlices and the node, and keeps the table in step until
// ctx ends. The table stays on return, as upstream's rules do: the next proxy takes it
// over, and --cleanup removes it.
func Run(ctx context.Context, opts Options) error {
	if opts.MinSyncPeriod <= 0 {
		opts.MinSyncPeriod = DefaultMinSyncPeriod
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Writer == nil {
		opts.Writer = Table{}
	}
	if opts.Conntrack == nil {
		opts.Conntrack = Conntrack{}
	}
	if err := ParseNodePortAddresses(opts.NodePortAddresses); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = serviceProxyLabels }))
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", opts.NodeName).String()
		}))
	services := factory.Core().V1().Services()
	slices := factory.Discovery().V1().EndpointSlices()
	nodes := nodeFactory.Core().V1().Nodes()

	healthz := newHealth(2*opts.SyncPeriod, time.Now)
	m := newMetrics(time.Now())
	if opts.HealthzBindAddress != "" {
		go serveHTTP(ctx, "health checks", opts.HealthzBindAddress, m.healthMux(healthz), opts.Log)
	}
	if addr := metricsAddress(opts.MetricsBindAddress); addr != "" {
		go serveHTTP(ctx, "metrics", addr, m.mux(), opts.Log)
	}
	kick := make(chan struct{}, 1)
	poke := func() {
		healthz.queued()
		m.queued(time.Now())
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	// changed is the handler of one informer: count is told of every object before
	// a sync is asked for.
	changed := func(count func(any)) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { count(obj); poke() },
			UpdateFunc: func(_, obj any) { count(obj); poke() },
			DeleteFunc: func(obj any) { count(obj); poke() },
		}
	}
	for inf, count := range map[cache.SharedIndexInformer]func(any){
		services.Informer(): m.serviceChanged,
		slices.Informer():   m.endpointsChanged,
		nodes.Informer():    func(any) {},
	} {
		if _, err := inf.AddEventHandler(changed(count)); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer nodeFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), services.Informer().HasSynced, slices.Informer().HasSynced, nodes.Informer().HasSynced) {
		return nil // stopped before the first sync
	}
	log := opts.Log
	if t, ok := opts.Writer.(Table); ok {
		log = log.With("table", "ip "+t.table().Name)
	}
	warnIfBridgeUnfiltered(log)
	log.Info("service proxy started", "node", opts.NodeName, "clusterCIDR", opts.ClusterCIDR,
		"nodePortAddresses", opts.NodePortAddresses, "masqueradeAll", opts.MasqueradeAll)

	opts.Log = log
	serviceHealth := newServiceHealthServers(opts.serviceHealthHost, healthz, opts.Log)
	go serviceHealth.closeOn(ctx)
	s := &syncer{opts: opts, services: services.Lister(), nodes: nodes.Lister(), serviceHealth: serviceHealth, metrics: m,
		slices: func() ([]*discoveryv1.EndpointSlice, error) { return slices.Lister().List(labels.Everything()) }}
	s.loop(ctx, kick, poke, healthz)
	return nil
}

// loop syncs at once, then on every change and every SyncPeriod, until ctx ends.
func (s *syncer) loop(ctx context.Context, kick <-chan struct{}, poke func(), healthz *health) {
	opts := s.opts
	periodic := time.NewTicker(opts.SyncPeriod)
	defer periodic.Stop()
	var last time.Time
	force := true
	for {
		// Space syncs at least MinSyncPeriod apart; what arrives meanwhile joins the
		// next one.
		if wait := opts.MinSyncPeriod - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		triggers := s.metrics.take()
		err := s.sync(force)
		s.metrics.synced(last, time.Now(), triggers, err)
		if err != nil {
			opts.Log.Error("syncing service rules; retrying", "err", err)
			poke()
		} else {
			healthz.updated(last)
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
			force = false
		case <-periodic.C:
			force = true
		}
	}
}

// warnIfBridgeUnfiltered warns, as upstream's proxy does, when bridged traffic skips
// the IP hooks: then a pod's reply to another pod on its bridge that reached it through
// a ClusterIP is not translated back, and the client drops it.
func warnIfBridgeUnfiltered(log *slog.Logger) {
	b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		log.Warn("br_netfilter is missing or net.bridge.bridge-nf-call-iptables is not 1: pods reaching pods on their own bridge through a Service may not get answers")
	}
}

// syncer computes and writes the ruleset from the listers.
type syncer struct {
	opts          Options
	services      corelisters.ServiceLister
	nodes         corelisters.NodeLister
	slices        func() ([]*discoveryv1.EndpointSlice, error)
	serviceHealth *serviceHealthServers
	metrics       *metrics
	applied       string // the last ruleset written, in its String form
	// udpTargets are the UDP endpoints of the last ruleset written.
	udpTargets map[netip.AddrPort]bool
}

func (s *syncer) sync(force bool) error {
	svcs, err := s.services.List(labels.Everything())
	if err != nil {
		return err
	}
	eps, err := s.slices()
	if err != nil {
		return err
	}
	in := Input{Services: svcs, EndpointSlices: eps, NodeName: s.opts.NodeName,
		ClusterCIDR: s.opts.ClusterCIDR, MasqueradeAll: s.opts.MasqueradeAll}
	in.NodePortAddresses, in.NodePortOnAllLocal = s.nodePortAddresses()
	s.serviceHealth.update(HealthCheckServices(in))
	rs := Build(in)
	text := rs.String()
	if !force && text == s.applied {
		return nil
	}
	start := time.Now()
	if err := s.opts.Writer.Apply(rs); err != nil {
		s.applied = ""
		s.metrics.syncFailures.WithLabelValues(ipFamily).Inc()
		return err
	}
	s.applied = text
	// Once no rule sends UDP to an endpoint, flows already going there must stop too.
	targets := udpTargets(rs)
	gone := map[netip.AddrPort]bool{}
	for ep := range s.udpTargets {
		if !targets[ep] {
			gone[ep] = true
		}
	}
	s.udpTargets = targets
	if err := s.opts.Conntrack.ClearUDPTo(gone); err != nil {
		s.opts.Log.Error("clearing UDP conntrack entries of removed endpoints", "err", err)
	}
	s.opts.Log.Debug("service rules written", "services", len(svcs), "endpointSlices", len(eps),
		"chains", len(rs.Chains), "took", time.Since(start))
	return nil
}

// nodePortAddresses resolves --nodeport-addresses to the addresses NodePorts are
// served on now.
func (s *syncer) nodePortAddresses() ([]netip.Addr, bool) {
	want := s.opts.NodePortAddresses
	if len(want) == 0 {
		want = []string{"primary"}
	}
	var out []netip.Addr
	var prefixes []netip.Prefix
	for _, v := range want {
		if v == "primary" {
			out = append(out, s.primaryNodeIPs()...)
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			continue // checked by ParseNodePortAddresses
		}
		if p.Bits() == 0 && p.Addr().Is4() {
			return nil, true
		}
		prefixes = append(prefixes, p)
	}
	if len(prefixes) > 0 {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			s.opts.Log.Error("listing the node's addresses for NodePorts", "err", err)
		}
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipnet.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			for _, p := range prefixes {
				if p.Contains(ip) {
					out = append(out, ip)
					break
				}
			}
		}
	}
	return out, false
}

// primaryNodeIPs are the node's IPv4 addresses from its Node object: the first
// InternalIP, or else the first ExternalIP, as upstream picks the node IP.
func (s *syncer) primaryNodeIPs() []netip.Addr {
	node, err := s.nodes.Get(s.opts.NodeName)
	if err != nil {
		return nil
	}
	for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type != typ {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
				return []netip.Addr{ip}
			}
		}
	}
	return nil
}
