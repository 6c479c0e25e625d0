// Package hollow runs many kubelets in one process, each on its own in-memory CRI
// runtime, for scale tests: every hollow node registers, heartbeats, watches its pods and
// reports their status exactly as a real kubelet does, but its containers are records.
package hollow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/cri/fake"
	"mizzen/internal/kubelet"
)

// Options configure a set of hollow nodes.
type Options struct {
	Count int
	// FirstIndex is the index of the first node: the nodes are FirstIndex to
	// FirstIndex+Count-1, so that several processes can run a cluster's hollow nodes
	// between them (each node's name, address and pod range come from its index).
	FirstIndex int
	// NamePrefix names node i NamePrefix+i; default "hollow-node-".
	NamePrefix string
	// Config is the API client configuration; each kubelet gets its own clientset from
	// it, with its own rate limits, as separate processes would.
	Config *rest.Config
	// NewClient overrides Config (tests pass a fake clientset).
	NewClient func(nodeName string) (kubernetes.Interface, error)
	// NodeCredentials, when set, gives each kubelet a client certificate of its own
	// (PEM certificate and key of system:node:<name> in system:nodes), as real kubelets
	// have, in place of Config's credentials: the Node authorizer, NodeRestriction and
	// priority and fairness then see each node as the apiserver would. The shared
	// events and Service clients keep Config's.
	NodeCredentials func(nodeName string) (certPEM, keyPEM []byte, err error)
	// Machine is what every node reports; 4 cores, 16 GiB, 100 GiB disk when nil.
	Machine *kubelet.MachineInfo
	MaxPods int64
	// Preloaded images are present on every node, as if baked into its disk.
	PreloadedImages []string
	Logger          *slog.Logger
	// RootDir holds the kubelets' pod volumes, one directory per node. When empty, Run
	// makes a temporary directory and removes it when it returns; a caller that may
	// kill the process (and so skip that) passes a directory of its own.
	RootDir string
}

// nodeIP is the i-th address of 172.16.0.0/12, the range hollow node IPs come from.
func nodeIP(i int) string {
	a := netip.MustParseAddr("172.16.0.0").As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n += uint32(i) + 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// podCIDR is node i's pod range, a /24 out of 10.64.0.0/10.
func podCIDR(i int) string {
	return fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256)
}

// nodeConfig is one hollow kubelet's client configuration: base, as a real kubelet
// talks, and with a transport (so a TCP connection) of its own. client-go caches
// transports by their TLS options, so clients made from equal configs share one
// transport and, over HTTP/2, one connection: 1,000 kubelets would queue their
// requests on one connection's header lock, lease renewals behind pod status writes,
// where separate kubelet processes each have their own. A config with a Proxy function
// is not cacheable (client-go cannot compare functions), so setting one, the same
// ProxyFromEnvironment client-go uses when it is unset, gives each client its own
// transport and changes nothing else.
func nodeConfig(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.UserAgent = "kubelet/mizzen (hollow)"
	cfg.ContentType = runtime.ContentTypeProtobuf // as real kubelets
	if cfg.QPS == 0 {
		// As a real kubelet's: at client-go's 5/s a node given pods faster than about
		// one a second queued their token requests and status writes in its client.
		cfg.QPS, cfg.Burst = kubelet.DefaultAPIQPS, kubelet.DefaultAPIBurst
	}
	if cfg.Proxy == nil && cfg.Transport == nil {
		cfg.Proxy = http.ProxyFromEnvironment
	}
	return cfg
}

// asNode makes cfg authenticate with the client certificate given, and nothing else.
func asNode(cfg *rest.Config, certPEM, keyPEM []byte) {
	cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = certPEM, keyPEM, "", ""
	cfg.BearerToken, cfg.BearerTokenFile, cfg.Username, cfg.Password = "", "", "", ""
	cfg.Impersonate = rest.ImpersonationConfig{}
	cfg.ExecProvider, cfg.AuthProvider = nil, nil
}

// Run runs the hollow nodes until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.Count <= 0 {
		return errors.New("hollow: Count must be positive")
	}
	if opts.FirstIndex < 0 {
		return errors.New("hollow: FirstIndex must not be negative")
	}
	if opts.FirstIndex+opts.Count > 16384 {
		return errors.New("hollow: node indexes end at 16383 (pod ranges come from 10.64.0.0/10)")
	}
	if opts.NamePrefix == "" {
		opts.NamePrefix = "hollow-node-"
	}
	if opts.Machine == nil {
		opts.Machine = &kubelet.MachineInfo{
			CPUCores: 4, MemoryBytes: 16 << 30, EphemeralStorage: 100 << 30,
			KernelVersion: "6.1.0-hollow", OSImage: "mizzen hollow node",
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	newClient := opts.NewClient
	nodeClient := newClient
	if newClient == nil {
		if opts.Config == nil {
			return errors.New("hollow: Config or NewClient is required")
		}
		newClient = func(string) (kubernetes.Interface, error) {
			return kubernetes.NewForConfig(nodeConfig(opts.Config))
		}
		nodeClient = newClient
		if opts.NodeCredentials != nil {
			nodeClient = func(name string) (kubernetes.Interface, error) {
				cert, key, err := opts.NodeCredentials(name)
				if err != nil {
					return nil, fmt.Errorf("credentials: %w", err)
				}
				cfg := nodeConfig(opts.Config)
				asNode(cfg, cert, key)
				return kubernetes.NewForConfig(cfg)
			}
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One event pipeline for all nodes: each kubelet still records its own events (with
	// its node as the source), but the correlation cache and sender are shared.
	eventClient, err := newClient(opts.NamePrefix + "events")
	if err != nil {
		return fmt.Errorf("hollow: events client: %w", err)
	}
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventClient.CoreV1().Events("")})
	defer events.Shutdown()
	// One Service informer for all nodes, where each real kubelet has its own: the
	// service environment variables of every container come from it, and a cache of
	// every Service per node would cost 1,000 nodes 1,000 copies.
	servicesClient, err := newClient(opts.NamePrefix + "services")
	if err != nil {
		return fmt.Errorf("hollow: services client: %w", err)
	}
	serviceInformers := informers.NewSharedInformerFactory(servicesClient, 0)
	services := serviceInformers.Core().V1().Services()
	servicesSynced := services.Informer().HasSynced
	servicesCtx, stopServices := context.WithCancel(ctx)
	serviceInformers.Start(servicesCtx.Done())
	defer func() { stopServices(); serviceInformers.Shutdown() }() // also on an early error return
	// Pod volumes (tokens, config maps, termination message files) are real files, as
	// in upstream's kubemark, in a directory of this run's own.
	rootDir := opts.RootDir
	if rootDir != "" {
		if err := os.MkdirAll(rootDir, 0o755); err != nil {
			return fmt.Errorf("hollow: %w", err)
		}
	} else {
		dir, err := os.MkdirTemp("", "mizzen-hollow-")
		if err != nil {
			return fmt.Errorf("hollow: %w", err)
		}
		defer os.RemoveAll(dir)
		rootDir = dir
	}
	var wg sync.WaitGroup
	errs := make(chan error, opts.Count)
	for i := opts.FirstIndex; i < opts.FirstIndex+opts.Count; i++ {
		name := fmt.Sprintf("%s%d", opts.NamePrefix, i)
		client, err := nodeClient(name)
		if err != nil {
			return fmt.Errorf("hollow: client for %s: %w", name, err)
		}
		rt := fake.New(fake.Options{PodCIDR: podCIDR(i), HostIP: nodeIP(i)})
		rt.PreloadImages(opts.PreloadedImages...)
		machine := *opts.Machine
		machine.SystemUUID = name
		machine.MachineID = name
		kopts := kubelet.Options{
			Client:   client,
			NodeName: name,
			Runtime:  rt.Client(),
			Images:   rt.Client(),
			NodeIP:   nodeIP(i),
			Machine:  &machine,
			MaxPods:  opts.MaxPods,
			Logger:   opts.Logger,
			Events:   kubelet.NewEventRecorder(events, name),
			RootDir:  filepath.Join(rootDir, name),
			NoTmpfs:  true,
			NoCSI:    true,

			ServiceLister:  services.Lister(),
			ServicesSynced: servicesSynced,
			// The fake runtime writes no log files: nothing to rotate.
			ContainerLogMaxSize: -1,
			// Nor walk disks for local storage usage: their containers write nothing.
			EvictionMonitoringPeriod: -1,
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := kubelet.Run(ctx, kopts); err != nil {
				errs <- fmt.Errorf("hollow node %s: %w", name, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when every kubelet stopped cleanly
}
