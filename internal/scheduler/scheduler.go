// Package scheduler is mizzen's kube-scheduler: it watches pending pods through the
// apiserver, picks a node for each with a plugin framework (filters, scores,
// preemption), and writes the decision back through the pods/binding subresource. It
// talks to nothing but the apiserver.
//
// Layout: framework/ defines plugin interfaces, statuses, NodeInfo and runs one
// profile's plugins; plugins/ holds one file per in-tree plugin; queue/ is the
// scheduling queue (active, back-off, unschedulable pool, nominations); cache/ keeps
// nodes and (assumed) pods and refreshes snapshots; config/ reads
// KubeSchedulerConfiguration files; metrics/ defines the Prometheus metrics. This
// package wires informers to the cache and queue and runs the scheduling loop:
// pop, snapshot, PreFilter/Filter over nodes in parallel (sampled in large clusters),
// PreScore/Score, assume, Reserve, Permit, then PreBind/Bind in a goroutine.
//
// Serving: /metrics (Prometheus text format) and /healthz are served over plain HTTP on
// --metrics-bind-address (default 127.0.0.1:10251); there is no HTTPS --secure-port.
// Client rate limits come from clientConnection, else from a caller's rest.Config, else
// upstream's qps 50 / burst 100; raise them for high pod rates.
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"mizzen/internal/componentserve"
	"mizzen/internal/httpserve"
	"mizzen/internal/leaderlost"
	"mizzen/internal/scheduler/cache"
	"mizzen/internal/scheduler/config"
	"mizzen/internal/scheduler/framework"
	"mizzen/internal/scheduler/metrics"
	"mizzen/internal/scheduler/plugins"
	"mizzen/internal/scheduler/queue"
)

// DefaultMetricsAddr is where /metrics and /healthz are served over plain HTTP unless
// told otherwise (upstream's old insecure scheduler port).
const DefaultMetricsAddr = "127.0.0.1:10251"

// Options configure Run.
type Options struct {
	// Kubeconfig is a kubeconfig path; RestConfig, if set, takes precedence. A
	// RestConfig's QPS/Burst are kept unless the configuration file sets
	// clientConnection.qps/burst; without either, upstream's 50/100 apply, which caps
	// bindings near 50 pods/s.
	Kubeconfig string
	RestConfig *rest.Config
	// ConfigFile is a KubeSchedulerConfiguration file; empty means upstream defaults.
	ConfigFile string
	// LeaderElect overrides leaderElection.leaderElect of the configuration (default true).
	LeaderElect *bool
	// MetricsAddr serves /metrics and /healthz over plain HTTP; "" uses DefaultMetricsAddr,
	// "0" disables the server.
	MetricsAddr string
	// Serving, when set, serves /healthz, /livez, /readyz and /metrics over HTTPS with
	// authentication and authorization delegated to the apiserver, as upstream on
	// :10259 (--secure-port, --bind-address).
	Serving *componentserve.Options
	// Identity names this replica in the Lease; defaults to hostname_<uuid>.
	Identity string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Run runs the scheduler until ctx ends. With leader election it campaigns for the
// kube-system/kube-scheduler Lease and schedules only while leading; losing the lease
// ends Run with an error, as upstream exits.
func Run(ctx context.Context, opts Options) error {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	cfg, err := config.Load(opts.ConfigFile)
	if err != nil {
		return err
	}
	if opts.LeaderElect != nil {
		cfg.LeaderElection.LeaderElect = opts.LeaderElect
	}
	restConfig := opts.RestConfig
	if restConfig == nil {
		kubeconfig := opts.Kubeconfig
		if kubeconfig == "" {
			kubeconfig = cfg.ClientConnection.Kubeconfig
		}
		if restConfig, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return fmt.Errorf("loading kubeconfig: %w", err)
		}
	}
	restConfig = rest.CopyConfig(restConfig)
	// clientConnection wins; otherwise a caller's rest.Config keeps its own limits; else
	// upstream's qps 50 / burst 100.
	switch {
	case cfg.ClientConnection.QPS > 0:
		restConfig.QPS = cfg.ClientConnection.QPS
	case restConfig.QPS == 0:
		restConfig.QPS = config.DefaultQPS
	}
	switch {
	case cfg.ClientConnection.Burst > 0:
		restConfig.Burst = int(cfg.ClientConnection.Burst)
	case restConfig.Burst == 0:
		restConfig.Burst = config.DefaultBurst
	}
	// Upstream's clientConnection.contentType defaults to protobuf: bindings, events and
	// the pod and node watches are several times cheaper to encode and decode than JSON
	// (the bind handler's JSON decoding alone was 1.3% of bench/scheduler's CPU).
	restConfig.ContentType = cfg.ClientConnection.ContentType
	if restConfig.ContentType == "" {
		restConfig.ContentType = config.DefaultContentType
	}
	if cfg.ClientConnection.AcceptContentTypes != "" {
		restConfig.AcceptContentTypes = cfg.ClientConnection.AcceptContentTypes
	}
	// Separate clients get separate rate limiters, as upstream: a burst of bindings must
	// not delay events, nor Lease renewals (which would cost the leadership).
	var clients clientSet
	for _, c := range []struct {
		dst   *kubernetes.Interface
		agent string
	}{{&clients.main, "kube-scheduler/mizzen"}, {&clients.events, "kube-scheduler/mizzen events"}, {&clients.leaderElection, "kube-scheduler/mizzen leader-election"}} {
		rc := rest.CopyConfig(restConfig)
		rc.UserAgent = c.agent
		if *c.dst, err = kubernetes.NewForConfig(rc); err != nil {
			return err
		}
	}
	return runWithClient(ctx, clients, cfg, opts, logger)
}

// clientSet holds the scheduler's clients, one per rate-limit budget.
type clientSet struct {
	main, events, leaderElection kubernetes.Interface
}

// runWithClient is Run after the clients exist: events, informers, metrics, and either
// scheduling directly or under leader election.
func runWithClient(ctx context.Context, clients clientSet, cfg *config.Configuration, opts Options, logger *slog.Logger) error {
	client := clients.main
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	broadcaster := events.NewBroadcaster(newBoundedEventSink(&events.EventSinkImpl{Interface: clients.events.EventsV1()}, maxEventWritesInFlight))
	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()

	factory := informers.NewSharedInformerFactory(client, 0)
	sched, err := New(ctx, client, factory, broadcaster, cfg, logger)
	if err != nil {
		return err
	}

	metricsErr := make(chan error, 1)
	if opts.MetricsAddr != "0" {
		addr := opts.MetricsAddr
		if addr == "" {
			addr = DefaultMetricsAddr
		}
		stop, err := serveMetrics(addr, sched, logger, metricsErr)
		if err != nil {
			return err
		}
		defer stop()
	}
	var leaderHealth *leaderelection.HealthzAdaptor
	if opts.Serving != nil {
		ep := componentserve.Endpoints{Client: client, Metrics: sched.Metrics().Handler(), Log: logger}
		if *cfg.LeaderElection.LeaderElect {
			leaderHealth = leaderelection.NewLeaderHealthzAdaptor(componentserve.LeaderHealthTimeout)
			ep.Checks = []componentserve.Check{componentserve.LeaderElectionCheck(leaderHealth)}
		}
		stop, err := componentserve.Serve(ctx, *opts.Serving, ep)
		if err != nil {
			return err
		}
		defer stop()
	}

	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil // stopped before the caches filled: a normal shutdown
			}
			return fmt.Errorf("informer for %v did not sync", typ)
		}
	}

	if !*cfg.LeaderElection.LeaderElect {
		sched.Run(ctx)
		return ctxErr(ctx, metricsErr)
	}
	identity := opts.Identity
	if identity == "" {
		host, _ := os.Hostname()
		identity = host + "_" + uuid.NewString()
	}
	le := cfg.LeaderElection
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		clients.leaderElection.CoreV1(), clients.leaderElection.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("creating leader election lock: %w", err)
	}
	lost := make(chan struct{})
	var once sync.Once
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            le.ResourceName,
		WatchDog:        leaderHealth,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("started leading", "lease", le.ResourceNamespace+"/"+le.ResourceName, "identity", identity)
				sched.Run(ctx)
			},
			OnStoppedLeading: func() { once.Do(func() { close(lost) }) },
			OnNewLeader: func(id string) {
				if id != identity {
					logger.Info("new leader elected", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	elector.Run(ctx)
	select {
	case <-ctx.Done():
		return ctxErr(ctx, metricsErr)
	case <-lost:
		if ctx.Err() != nil {
			return ctxErr(ctx, metricsErr)
		}
		return leaderlost.ErrLost
	}
}

func ctxErr(ctx context.Context, metricsErr chan error) error {
	select {
	case err := <-metricsErr:
		return err
	default:
	}
	return nil
}

// serveMetrics serves /metrics and /healthz until the returned stop is called, which
// closes the port before it returns: the server bundle runs the scheduler again after
// it loses its Lease, and that run listens on the same port.
func serveMetrics(addr string, sched *Scheduler, logger *slog.Logger, errc chan<- error) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", sched.Metrics().Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics server: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving metrics", "address", ln.Addr().String())
	return httpserve.Serve(srv, ln, func(err error) { errc <- err }), nil
}

// Scheduler is one scheduler instance with its profiles, queue and cache.
type Scheduler struct {
	client    kubernetes.Interface
	factory   informers.SharedInformerFactory
	podLister corelisters.PodLister
	priority  priorityResolver
	logger    *slog.Logger

	cache    *cache.Cache
	snapshot *cache.Snapshot
	queue    *queue.Queue
	profiles map[string]*framework.Framework
	metrics  *metrics.Metrics

	percentageOfNodesToScore int32
	// nextStartNodeIndex rotates where filtering starts, so sampling spreads over nodes.
	nextStartNodeIndex int
	bindWG             sync.WaitGroup
	// calls are the pods' status patches, made outside the scheduling loop.
	calls *podCalls
	// bindings bounds the binding calls in flight (maxBindingsInFlight).
	bindings slots
	// handlers are the informer event handlers that fill the cache and the queue.
	handlers []toolscache.ResourceEventHandlerRegistration
}

// New builds a scheduler and registers its informer handlers on factory (start the
// factory afterwards). broadcaster may be nil in tests that do not check events.
func New(ctx context.Context, client kubernetes.Interface, factory informers.SharedInformerFactory, broadcaster events.EventBroadcaster, cfg *config.Configuration, logger *slog.Logger) (*Scheduler, error) {
	if logger == nil {
		logger = slog.Default()
	}
	profiles, skipped := config.Resolve(cfg)
	if len(skipped) > 0 {
		logger.Warn("configuration names upstream plugins mizzen does not implement; they are skipped", "plugins", skipped)
	}
	s := &Scheduler{
		client:    client,
		factory:   factory,
		podLister: factory.Core().V1().Pods().Lister(),
		priority:  priorityResolver{classes: factory.Scheduling().V1().PriorityClasses().Lister()},
		logger:    logger,
		cache:     cache.New(),
		snapshot:  cache.NewEmptySnapshot(),
		profiles:  map[string]*framework.Framework{},
		calls:     newPodCalls(),
		bindings:  make(slots, maxBindingsInFlight),
	}
	if cfg.PercentageOfNodesToScore != nil {
		s.percentageOfNodesToScore = *cfg.PercentageOfNodesToScore
	}
	registry := map[string]framework.PluginFactory{}
	for name, f := range plugins.Registry() {
		registry[name] = framework.PluginFactory(f)
	}
	nominator := &lateNominator{}
	pluginEvents := map[string][]framework.ClusterEventWithHint{}
	for _, pc := range profiles {
		var recorder events.EventRecorder = noopRecorder{}
		if broadcaster != nil {
			recorder = broadcaster.NewRecorder(scheme.Scheme, pc.SchedulerName)
		}
		fwk, err := framework.NewFramework(registry, pc, framework.Options{
			ClientSet:       client,
			InformerFactory: factory,
			EventRecorder:   recorder,
			Snapshot:        s.snapshot,
			Nominator:       nominator,
			Parallelism:     int(*cfg.Parallelism),
		})
		if err != nil {
			return nil, err
		}
		s.profiles[pc.SchedulerName] = fwk
		for name, evs := range fwk.EventsToRegister() {
			pluginEvents[name] = append(pluginEvents[name], evs...)
		}
	}
	s.queue = queue.New(queue.Options{
		InitialBackoff: time.Duration(*cfg.PodInitialBackoffSeconds) * time.Second,
		MaxBackoff:     time.Duration(*cfg.PodMaxBackoffSeconds) * time.Second,
		PluginEvents:   pluginEvents,
	})
	nominator.q = s.queue
	s.metrics = metrics.New(s.queue.Pending)
	if err := s.addEventHandlers(pluginEvents); err != nil {
		return nil, err
	}
	return s, nil
}

// Metrics returns the scheduler's metrics.
func (s *Scheduler) Metrics() *metrics.Metrics { return s.metrics }

// Run schedules pods until ctx ends (informers must be started and synced).
func (s *Scheduler) Run(ctx context.Context) {
	// A synced informer has listed everything, but its handlers may not have been
	// given every listed object yet: scheduling then would see nodes without the pods
	// already bound to them and overfill them (seen when a scheduler restarts with
	// pending pods). Wait, as upstream's WaitForHandlersSync, until they have.
	syncs := make([]toolscache.InformerSynced, len(s.handlers))
	for i, h := range s.handlers {
		syncs[i] = h.HasSynced
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), syncs...) {
		return
	}
	go s.queue.Run(ctx)
	// Pods parked before this replica became leader may have been helped meanwhile.
	s.queue.MoveAllToActiveOrBackoffQueue(framework.EventForceActivate, nil, nil, nil)
	for {
		if !s.scheduleOne(ctx) {
			break
		}
	}
	s.bindWG.Wait()
	s.calls.wg.Wait()
}

// lateNominator breaks the construction cycle: frameworks need the nominator before
// the queue (which needs the frameworks' events) exists.
type lateNominator struct{ q *queue.Queue }

func (n *lateNominator) NominatedPodsForNode(nodeName string) []*framework.PodInfo {
	return n.q.NominatedPodsForNode(nodeName)
}

func (n *lateNominator) HasNominatedPods() bool { return n.q.HasNominatedPods() }

// Activate makes the frameworks' Handle.Activate reach the queue: without it the
// framework's type check found no PodActivator and a preemptor whose victims' calls
// failed waited for an event that never came.
func (n *lateNominator) Activate(pod *v1.Pod) { n.q.Activate(pod) }

var _ framework.PodActivator = (*lateNominator)(nil)

type noopRecorder struct{}

func (noopRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...interface{}) {
}
