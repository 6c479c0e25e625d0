package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/componentserve"
	"mizzen/internal/controller/util"
	"mizzen/internal/controllermanager/metrics"
	"mizzen/internal/informermux"
	"mizzen/internal/leaderlost"
	"mizzen/internal/protodecode"
)

// Lease that elects the active controller-manager, as upstream.
const (
	leaseNamespace = "kube-system"
	leaseName      = "kube-controller-manager"
)

// DefaultContentType is what the controllers send and ask for unless the rest config
// says otherwise: protobuf, as upstream's --kube-api-content-type. client-go's typed
// clients already prefer it when none is set; this also covers the requests written
// by hand (the event recorder's POSTs, evictions, bindings, ...). Clients that need
// JSON (dynamic) or choose their own (metadata, discovery) still do.
const DefaultContentType = "application/vnd.kubernetes.protobuf"

// RunOptions are everything Run needs beyond the rest config.
type RunOptions struct {
	Options
	// Controllers is the --controllers list: "*" enables every controller that is on by
	// default, "foo" enables foo, "-foo" disables foo. Empty means {"*"}.
	Controllers []string
	// LeaderElect runs controllers only while this process holds the Lease
	// kube-system/kube-controller-manager.
	LeaderElect bool
	// LeaderElection timings; zero values take upstream's defaults (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Identity names this replica in the Lease; empty means hostname plus a random suffix.
	Identity string
	// RootCAFile, when set, replaces the rest config's CAData/CAFile as the bundle the
	// root-ca-cert-publisher writes into kube-root-ca.crt.
	RootCAFile string
	// UseServiceAccountCredentials runs each controller with a token of its own
	// ServiceAccount in kube-system (Descriptor.Account), as upstream's
	// --use-service-account-credentials; otherwise every controller works with the
	// manager's credentials.
	UseServiceAccountCredentials bool
	// Serving, when set, serves /healthz, /livez, /readyz and /metrics over HTTPS,
	// authenticated and authorized by the apiserver. client-go takes one
	// work queue metrics provider per process: the first serving Run in a process
	// reports the queues of every later one too.
	Serving *ServingOptions
}

// Run starts the controller-manager against the apiserver of cfg and blocks until ctx
// ends (nil) or leadership is lost (an error: the caller should exit, as upstream does).
func Run(ctx context.Context, cfg *rest.Config, opts RunOptions) error {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "kube-controller-manager/mizzen"
	}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	if cfg.ContentType == "" {
		cfg.ContentType = DefaultContentType
	}
	// The root client feeds the shared informers, whose watch events are most of what
	// the manager decodes: its core and apps groups decode without copying each
	// event's object twice first (as do the controllers' own clients, forController).
	client, err := protodecode.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("controller-manager client: %w", err)
	}
	if opts.RootCAFile != "" {
		ca, err := os.ReadFile(opts.RootCAFile)
		if err != nil {
			return fmt.Errorf("root CA file: %w", err)
		}
		opts.RootCA = ca
	} else if len(cfg.CAData) > 0 {
		opts.RootCA = cfg.CAData
	} else if cfg.CAFile != "" {
		ca, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return fmt.Errorf("root CA file: %w", err)
		}
		opts.RootCA = ca
	}
	all := append(append(append(infraControllers(), workloadControllers()...), storageControllers()...), certificateControllers()...)
	return run(ctx, client, cfg, all, opts)
}

// run is Run after the client is built, so tests can pass a fake clientset and their
// own descriptors.
func run(ctx context.Context, client kubernetes.Interface, cfg *rest.Config, all []Descriptor, opts RunOptions) error {
	chosen, err := enabledControllers(all, opts.Controllers)
	if err != nil {
		return err
	}
	var m *metrics.Metrics
	var leaderHealth *leaderelection.HealthzAdaptor
	if opts.Serving != nil {
		m = metrics.New()
		// Before any controller makes its queue, so that every queue reports.
		workqueue.SetProvider(m)
		if opts.LeaderElect {
			leaderHealth = leaderelection.NewLeaderHealthzAdaptor(componentserve.LeaderHealthTimeout)
			m.SetLeader(leaseName, false)
		}
		stop, err := serve(ctx, *opts.Serving, client, m, leaderHealth)
		if err != nil {
			return err
		}
		defer stop()
	}
	startAll := func(ctx context.Context) {
		cc := &ControllerContext{
			Client: client,
			Config: cfg,
			// One listener for each informer's handlers (a dozen on pods).
			Informers: informermux.NewFactory(informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(util.TrimManagedFields))),
			Options:   opts.Options,
		}
		clients := &clientBuilder{root: cfg, rootClient: client, useSA: opts.UseServiceAccountCredentials}
		for _, d := range chosen {
			own, err := cc.forController(ctx, clients, d)
			if err != nil {
				slog.ErrorContext(ctx, "controller failed to start", "controller", d.Name, "err", err)
				continue
			}
			var skipped *notConfiguredError
			if err := d.Start(ctx, own); errors.As(err, &skipped) {
				slog.InfoContext(ctx, "controller not started", "controller", d.Name, "reason", skipped.reason)
				continue
			} else if err != nil {
				slog.ErrorContext(ctx, "controller failed to start", "controller", d.Name, "err", err)
				continue
			}
			slog.InfoContext(ctx, "started controller", "controller", d.Name)
		}
		cc.Informers.Start(ctx.Done())
	}
	if !opts.LeaderElect {
		startAll(ctx)
		<-ctx.Done()
		return nil
	}
	return runElected(ctx, client, opts, startAll, m, leaderHealth)
}

// runElected campaigns for the Lease and runs start while leading; m and health, when
// not nil, follow the leadership.
func runElected(ctx context.Context, client kubernetes.Interface, opts RunOptions, start func(context.Context),
	m *metrics.Metrics, health *leaderelection.HealthzAdaptor) error {
	id := opts.Identity
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + string(uuid.NewUUID())
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: leaseNamespace, Name: leaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	lost := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   orDefault(opts.LeaseDuration, 15*time.Second),
		RenewDeadline:   orDefault(opts.RenewDeadline, 10*time.Second),
		RetryPeriod:     orDefault(opts.RetryPeriod, 2*time.Second),
		ReleaseOnCancel: true,
		Name:            leaseName,
		WatchDog:        health,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				slog.InfoContext(ctx, "became leader", "lease", leaseNamespace+"/"+leaseName, "identity", id)
				if m != nil {
					m.SetLeader(leaseName, true)
				}
				start(ctx)
			},
			OnStoppedLeading: func() {
				if m != nil {
					m.SetLeader(leaseName, false)
				}
				if ctx.Err() == nil {
					close(lost)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(ctx) // returns when ctx ends or leadership is lost
	select {
	case <-lost:
		return leaderlost.ErrLost
	default:
		return nil
	}
}

// forController is cc with the credentials controller d works with.
func (cc *ControllerContext) forController(ctx context.Context, clients *clientBuilder, d Descriptor) (*ControllerContext, error) {
	account := d.Account
	if account == "" {
		account = d.Name
	}
	cfg, err := clients.config(ctx, account)
	if err != nil || cfg == nil {
		return cc, err
	}
	client, err := protodecode.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	own := *cc
	own.Client, own.Config = client, cfg
	return &own, nil
}

// notConfiguredError is returned by a Descriptor's Start when the flags leave the
// controller nothing to do (as upstream skips node IPAM without a cluster CIDR).
type notConfiguredError struct{ reason string }

func (e *notConfiguredError) Error() string { return "not configured: " + e.reason }

func notConfigured(reason string) error { return &notConfiguredError{reason: reason} }

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// enabledControllers resolves --controllers against the known descriptors the way
// upstream does: an explicit "foo" or "-foo" (by name or alias) wins over "*", and "*"
// enables only the controllers that are on by default. Unknown names are an error.
func enabledControllers(all []Descriptor, flags []string) ([]Descriptor, error) {
	if len(flags) == 0 {
		flags = []string{"*"}
	}
	canonical := make(map[string]string, len(all))
	for _, d := range all {
		canonical[d.Name] = d.Name
		for _, a := range d.Aliases {
			canonical[a] = d.Name
		}
	}
	resolved := make([]string, 0, len(flags))
	for _, f := range flags {
		if f == "*" {
			resolved = append(resolved, f)
			continue
		}
		disable := strings.HasPrefix(f, "-")
		name, ok := canonical[strings.TrimPrefix(f, "-")]
		if !ok {
			return nil, fmt.Errorf("%q is not in the list of known controllers", f)
		}
		if disable {
			name = "-" + name
		}
		resolved = append(resolved, name)
	}
	flags = resolved
	var out []Descriptor
	for _, d := range all {
		if isEnabled(d, flags) {
			out = append(out, d)
		}
	}
	return out, nil
}

func isEnabled(d Descriptor, flags []string) bool {
	if slices.Contains(flags, d.Name) {
		return true
	}
	if slices.Contains(flags, "-"+d.Name) {
		return false
	}
	return slices.Contains(flags, "*") && !d.DisabledByDefault
}
