// Package ccm runs the cloud-controller-manager, `mizzen cloud-controller-manager`
// and the `mizzen server` component of that name: it builds the provider named by
// --cloud-provider and runs the cloud node, node-lifecycle, service (load balancer)
// and route controllers on it while holding the Lease
// kube-system/cloud-controller-manager, as upstream.
package ccm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"mizzen/internal/cloud"
	"mizzen/internal/cloud/controller/node"
	"mizzen/internal/cloud/controller/nodelifecycle"
	"mizzen/internal/cloud/controller/route"
	"mizzen/internal/cloud/controller/service"
	"mizzen/internal/cloud/local"
	"mizzen/internal/leaderlost"
)

// Lease that elects the active cloud-controller-manager, as upstream.
const (
	leaseNamespace = "kube-system"
	leaseName      = "cloud-controller-manager"
)

// User is the identity `mizzen server` gives its cloud-controller-manager, bound to
// the ClusterRole system:cloud-controller-manager.
const User = "system:cloud-controller-manager"

// The controllers, by upstream's names; each also answers to its older alias.
const (
	CloudNode          = "cloud-node-controller"
	CloudNodeLifecycle = "cloud-node-lifecycle-controller"
	ServiceLB          = "service-lb-controller"
	NodeRoute          = "node-route-controller"
)

var aliases = map[string]string{
	"cloud-node": CloudNode, "cloud-node-lifecycle": CloudNodeLifecycle, "service": ServiceLB, "route": NodeRoute,
}

// All lists every controller, in start order.
var All = []string{CloudNode, CloudNodeLifecycle, ServiceLB, NodeRoute}

// Options are the cloud-controller-manager's flags.
type Options struct {
	// CloudProvider names the provider; only "local" exists.
	CloudProvider string
	// Local configures the local provider (its Routes are filled in from the options below).
	Local local.Options
	// ClusterName is passed to the provider (--cluster-name, "kubernetes").
	ClusterName string
	// Controllers is --controllers: "*" for all, "foo" enables, "-foo" disables.
	Controllers []string
	// ConfigureCloudRoutes runs the route controller; ClusterCIDR bounds its routes.
	ConfigureCloudRoutes bool
	ClusterCIDR          string
	// Timings; zero values take upstream's defaults.
	NodeStatusUpdateFrequency time.Duration // 5m
	NodeMonitorPeriod         time.Duration // 5s
	RouteReconciliationPeriod time.Duration // 10s
	ConcurrentServiceSyncs    int           // 1
	ConcurrentNodeSyncs       int           // 1
	// LeaderElect runs the controllers only while holding the Lease.
	LeaderElect bool
	// Identity names this replica in the Lease; empty: hostname and a random suffix.
	Identity string
	Log      *slog.Logger
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// enabled resolves --controllers against All.
func enabled(list []string) (map[string]bool, error) {
	if len(list) == 0 {
		list = []string{"*"}
	}
	on := map[string]bool{}
	for _, item := range list {
		name, off := strings.CutPrefix(strings.TrimSpace(item), "-")
		if name == "*" {
			for _, c := range All {
				if _, set := on[c]; !set {
					on[c] = !off
				}
			}
			continue
		}
		if a, ok := aliases[name]; ok {
			name = a
		}
		if !slices.Contains(All, name) {
			return nil, fmt.Errorf("--controllers: unknown controller %q (known: %s)", name, strings.Join(All, ", "))
		}
		on[name] = !off
	}
	return on, nil
}

// NewProvider builds the provider the options name.
func NewProvider(opts Options) (cloud.Interface, error) {
	switch opts.CloudProvider {
	case local.ProviderName:
		lo := opts.Local
		if opts.ConfigureCloudRoutes {
			ro := local.RouteOptions{}
			if opts.ClusterCIDR != "" {
				p, err := netip.ParsePrefix(opts.ClusterCIDR)
				if err != nil {
					return nil, fmt.Errorf("--cluster-cidr: %w", err)
				}
				ro.ClusterCIDR = p.Masked()
			}
			lo.Routes = &ro
		}
		return local.New(lo)
	case "":
		return nil, errors.New("--cloud-provider is required (the one provider is \"local\")")
	default:
		return nil, fmt.Errorf("--cloud-provider %q is unknown (the one provider is \"local\")", opts.CloudProvider)
	}
}

// Run builds the provider and runs the enabled controllers against the apiserver of
// cfg until ctx ends (nil) or leadership is lost (an error).
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	on, err := enabled(opts.Controllers)
	if err != nil {
		return err
	}
	provider, err := NewProvider(opts)
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "cloud-controller-manager/mizzen"
	}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 20, 30 // upstream's --kube-api-qps/--kube-api-burst
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	start := func(ctx context.Context) error {
		// The apiserver may not answer yet: the provider's first look is retried.
		err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := provider.Initialize(ctx, client); err != nil {
				opts.Log.Warn("initializing the cloud provider; will retry", "provider", provider.ProviderName(), "err", err)
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return nil // ctx ended
		}
		return StartControllers(ctx, client, provider, on, opts)
	}
	if !opts.LeaderElect {
		if err := start(ctx); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}
	return runElected(ctx, client, opts, start)
}

// StartControllers starts the controllers enabled in on, in the background.
func StartControllers(ctx context.Context, client kubernetes.Interface, provider cloud.Interface, on map[string]bool, opts Options) error {
	log := opts.Log
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	if on[CloudNode] {
		c, err := node.New(client, provider, nodes, orDefault(opts.NodeStatusUpdateFrequency, 5*time.Minute))
		if err != nil {
			return err
		}
		go c.Run(ctx, orDefault(opts.ConcurrentNodeSyncs, 1))
		log.Info("started controller", "controller", CloudNode)
	}
	if on[CloudNodeLifecycle] {
		c, err := nodelifecycle.New(client, provider, nodes, orDefault(opts.NodeMonitorPeriod, 5*time.Second))
		if err != nil {
			return err
		}
		c.Log = log.With("controller", CloudNodeLifecycle)
		go c.Run(ctx)
		log.Info("started controller", "controller", CloudNodeLifecycle)
	}
	if on[ServiceLB] {
		c, err := service.New(client, provider, orDefault(opts.ClusterName, "kubernetes"), factory.Core().V1().Services(), nodes)
		if err != nil {
			log.Warn("controller not started", "controller", ServiceLB, "reason", err)
		} else {
			go c.Run(ctx, orDefault(opts.ConcurrentServiceSyncs, 1))
			log.Info("started controller", "controller", ServiceLB)
		}
	}
	if on[NodeRoute] {
		switch {
		case !opts.ConfigureCloudRoutes:
			log.Info("controller not started", "controller", NodeRoute,
				"reason", "will not configure cloud provider routes: --configure-cloud-routes=false (the pod network routes between nodes itself)")
		default:
			var cidr netip.Prefix
			if opts.ClusterCIDR != "" {
				p, err := netip.ParsePrefix(opts.ClusterCIDR)
				if err != nil {
					return fmt.Errorf("--cluster-cidr: %w", err)
				}
				cidr = p.Masked()
			}
			c, err := route.New(client, provider, orDefault(opts.ClusterName, "kubernetes"), cidr, nodes,
				orDefault(opts.RouteReconciliationPeriod, 10*time.Second))
			if err != nil {
				log.Warn("controller not started", "controller", NodeRoute, "reason", err)
				break
			}
			c.Log = log.With("controller", NodeRoute)
			go c.Run(ctx)
			log.Info("started controller", "controller", NodeRoute)
		}
	}
	factory.Start(ctx.Done())
	return nil
}

// runElected campaigns for the Lease and runs start while leading.
func runElected(ctx context.Context, client kubernetes.Interface, opts Options, start func(context.Context) error) error {
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
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lost := false
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true, Name: leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				opts.Log.Info("became leader", "lease", leaseNamespace+"/"+leaseName, "identity", id)
				if err := start(ctx); err != nil {
					cancel(err)
				}
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost = true
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(ctx)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if lost {
		return leaderlost.ErrLost
	}
	return nil
}
