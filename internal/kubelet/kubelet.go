// Package kubelet is the node agent: it registers its Node and keeps its status and
// Lease fresh, discovers the pods bound to it through its own watch, and drives each pod
// to its spec through a CRI runtime (sandbox, image pulls, init containers, containers,
// restarts with back-off, probes, graceful termination), writing pod status back through
// pods/status. Each pod has one worker goroutine whose sync is level-triggered: it reads
// the pod and the runtime's current state and does the next thing, so a restarted kubelet
// adopts running containers without touching them.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cri "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"

	"mizzen/internal/kubelet/csi"
	"mizzen/internal/kubelet/eviction"
	"mizzen/internal/kubelet/logrotate"
	"mizzen/internal/kubelet/podcgroups"
	nodeserver "mizzen/internal/kubelet/server"
	"mizzen/internal/kubelet/volume"
	"mizzen/internal/localpath"
	mizzenversion "mizzen/internal/version"
)

// Version is the kubelet version reported in NodeInfo unless Options override it: the
// build's own, as upstream's kubelet reports its gitVersion.
var Version = mizzenversion.GitVersion()

// Options configure a kubelet. Client, NodeName, Runtime and Images are required.
type Options struct {
	Client   kubernetes.Interface
	NodeName string
	// Runtime and Images are the CRI services: the k8s.io/cri-client remote clients in
	// production, an in-process fake for hollow nodes and tests.
	Runtime cri.RuntimeService
	Images  cri.ImageManagerService

	// NodeIP is the InternalIP; detected from the host's interfaces when empty.
	NodeIP string
	// Hostname is the Hostname address and the kubernetes.io/hostname label; NodeName
	// when empty.
	Hostname           string
	NodeLabels         map[string]string
	RegisterWithTaints []v1.Taint
	// ExternalCloudProvider is --cloud-provider external: the node registers with the
	// taint node.cloudprovider.kubernetes.io/uninitialized for the
	// cloud-controller-manager to remove, which also owns its addresses: the kubelet
	// posts its NodeIP (and annotates it as alpha.kubernetes.io/provided-node-ip) only
	// when one was given and the node has no addresses yet, as upstream.
	ExternalCloudProvider bool
	// nodeIPSpecified records that NodeIP was given rather than detected.
	nodeIPSpecified bool
	// Machine describes the node's hardware and OS; read from the host when nil. Hollow
	// nodes pass a fixed one.
	Machine *MachineInfo
	// MaxPods is the pods capacity; 110 when zero.
	MaxPods int64
	// ClusterDNS and ClusterDomain configure pods with dnsPolicy ClusterFirst.
	ClusterDNS    []string
	ClusterDomain string
	// KubeletVersion is reported in NodeInfo; Version when empty.
	KubeletVersion string
	// Port is the kubelet endpoint advertised in status.daemonEndpoints, where NodeServer
	// listens unless its Address says otherwise; 10250 when zero.
	Port int32
	// PodLogsDir is where the runtime writes container logs; /var/log/pods when empty.
	PodLogsDir string
	// Events records the kubelet's events; nil makes the kubelet send its own through
	// Client. Hollow nodes share one broadcaster and pass recorders made from it.
	Events record.EventRecorder
	// PodCIDRChanged, if set, is called with the Node's spec.podCIDR when it is first
	// seen and whenever it changes: the real runtime writes its CNI configuration from it.
	PodCIDRChanged func(podCIDR string)
	// NodeServer, when set, serves the node server (logs, exec, attach, port-forward,
	// stats) over HTTPS on Port; Run fills in its runtime, node name, root directory and
	// pods.
	NodeServer *nodeserver.Options
	// ParallelStarts is how many sandbox and container starts run at once (see
	// startGate); twice the number of CPUs when zero: a start also waits on disk and on
	// the runtime's sockets, and on the 2-core bench machine 4 slots started a burst of
	// 20 pods sooner than 2 or 8 did.
	ParallelStarts int
	// RootDir is the kubelet's state directory; its filesystem is the node's
	// ephemeral-storage capacity. /var/lib/kubelet when empty.
	RootDir string
	// LocalPathDir is where this node keeps local-path volumes (internal/localpath): the
	// kubelet advertises it on its Node and removes deleted volumes' directories.
	// Empty: the node offers no local-path storage.
	LocalPathDir string
	// NoCSI turns the CSI plugin registration watcher off (hollow nodes have no drivers).
	NoCSI bool
	// NoTmpfs keeps memory-backed volumes (medium Memory, secrets, projected tokens) as
	// plain directories: hollow nodes and unprivileged runs cannot mount tmpfs.
	NoTmpfs bool
	// PodManifestPath is a directory of static pod manifests to run, each mirrored to
	// the apiserver; none when empty.
	PodManifestPath string
	// PodCgroups, when set, are the host's cgroup hierarchies, where the kubelet removes
	// each pod's cgroup once the pod's sandboxes are gone (runc leaves them behind).
	// Nil for a runtime that makes no cgroups, such as hollow nodes' fake one.
	PodCgroups *podcgroups.Cgroups
	// ServiceLister and ServicesSynced, set together, are a shared informer's view of
	// every Service in the cluster (indexed by namespace) and whether it has listed
	// once: containers' service environment variables come from it. Hollow nodes share
	// one across their kubelets; when nil the kubelet runs an informer of its own.
	ServiceLister  corelisters.ServiceLister
	ServicesSynced cache.InformerSynced
	// Container log rotation, as upstream's --container-log-* flags (see logrotate):
	// zero means upstream's default; a negative ContainerLogMaxSize turns rotation off,
	// as hollow nodes do, whose runtime writes no files.
	ContainerLogMaxSize         int64         // bytes, 10Mi
	ContainerLogMaxFiles        int           // files kept per container, current one included; 5, at least 2
	ContainerLogMaxWorkers      int           // containers rotated at once; 1, at least 1
	ContainerLogMonitorInterval time.Duration // 10s, at least 3s
	// EvictionMonitoringPeriod is how often pods are measured against their local
	// ephemeral-storage limits (emptyDir sizeLimit, containers' ephemeral-storage) and
	// evicted past them; 10s when zero, as upstream. Negative turns the checks off, as
	// hollow nodes do, whose runtime writes no files.
	EvictionMonitoringPeriod time.Duration
	// NodePressure, when set and EvictionMonitoringPeriod is not negative, turns on
	// node-pressure eviction (see eviction.Pressure): MemoryPressure, DiskPressure and
	// PIDPressure conditions, pod admission under pressure, and evictions. Nil for
	// hollow nodes, which must not read the real machine.
	NodePressure *NodePressure

	// Clock drives every timer (back-off, probes, relists, status, lease); the real
	// clock when nil.
	Clock clock.WithTickerAndDelayedExecution
	// Periods; zero means the upstream default.
	RelistPeriod              time.Duration // runtime relist, 1s
	ResyncPeriod              time.Duration // periodic sync of each pod, ±25% (see podWorkers), 1m as upstream's --sync-frequency
	NodeStatusUpdateFrequency time.Duration // status computed, 10s
	NodeStatusReportFrequency time.Duration // status posted even if unchanged: 5m, or NodeStatusUpdateFrequency when only that is set
	LeaseRenewInterval        time.Duration // 10s
	FileCheckFrequency        time.Duration // static pod manifests reread, 20s
	Logger                    *slog.Logger
	// AllowedUnsafeSysctls are the sysctls beyond the safe ones that pods may set, names
	// or prefixes ending in '*' (upstream's --allowed-unsafe-sysctls).
	AllowedUnsafeSysctls []string
	// AppArmor says whether the host enforces AppArmor profiles; read from the kernel
	// when nil. Pods asking for a profile are refused where it does not.
	AppArmor *bool
}

// NodePressure configures node-pressure eviction, as upstream's --eviction-* flags.
type NodePressure struct {
	// Thresholds are the hard and soft thresholds (eviction.ParseThresholds).
	Thresholds []eviction.Threshold
	// MaxPodGracePeriodSeconds caps the grace period of pods evicted for a soft
	// threshold; negative leaves the pod's own.
	MaxPodGracePeriodSeconds int64
	// TransitionPeriod is how long a pressure condition stays True after its
	// threshold was last met; 5m when zero.
	TransitionPeriod time.Duration
	// Measurer measures the node and its pods; the host (eviction.Host, over RootDir,
	// the runtime's image filesystem, PodCgroups) when nil. Tests feed values.
	Measurer eviction.Measurer
}

// MachineInfo is what the node reports about itself.
type MachineInfo struct {
	CPUCores         int64
	MemoryBytes      int64
	EphemeralStorage int64
	MachineID        string
	SystemUUID       string
	BootID           string
	KernelVersion    string
	OSImage          string
}

// DefaultAPIQPS and DefaultAPIBurst are the request rate a kubelet's API client is
// allowed when its configuration sets none: upstream's kubelet defaults
// (kubeAPIQPS 50, kubeAPIBurst 100). client-go's own (5/s, burst 10) would make
// status writes the bottleneck of pod startup.
const (
	DefaultAPIQPS   = 50
	DefaultAPIBurst = 100
)

const (
	defaultMaxPods        = 110
	leaseDurationSeconds  = 40
	defaultGracePeriodSec = 30
	// localPathSweepPeriod: how soon a deleted local-path volume's directory goes.
	localPathSweepPeriod = 10 * time.Second
	// orphanSweepPeriod: how often what is left of pods the kubelet no longer knows is
	// removed (upstream does it in its 2 s housekeeping); not tied to the pods' resync.
	orphanSweepPeriod = 10 * time.Second
	// objectCacheTTL is how long an object read through volumeSources' cache (a
	// PersistentVolume; a ConfigMap or Secret no registered pod watches) is reused. A
	// change to one reaches a running pod's volume within a resync (1m ±25%) plus
	// this: 85 s at most, against upstream's 90 s plus its node TTL (0 to 5 min by
	// cluster size). Watched ConfigMaps and Secrets wake their pods at once.
	objectCacheTTL = 10 * time.Second
)

func (o *Options) setDefaults() error {
	switch {
	case o.Client == nil:
		return errors.New("kubelet: Options.Client is required")
	case o.NodeName == "":
		return errors.New("kubelet: Options.NodeName is required")
	case o.Runtime == nil || o.Images == nil:
		return errors.New("kubelet: Options.Runtime and Options.Images are required")
	case (o.ServiceLister == nil) != (o.ServicesSynced == nil):
		return errors.New("kubelet: Options.ServiceLister and Options.ServicesSynced go together")
	}
	if o.Hostname == "" {
		o.Hostname = o.NodeName
	}
	if o.MaxPods == 0 {
		o.MaxPods = defaultMaxPods
	}
	if o.KubeletVersion == "" {
		o.KubeletVersion = Version
	}
	if o.Port == 0 {
		o.Port = 10250
	}
	if o.PodLogsDir == "" {
		o.PodLogsDir = "/var/log/pods"
	}
	if o.ParallelStarts <= 0 {
		o.ParallelStarts = runtime.NumCPU() * 2
	}
	if o.RootDir == "" {
		o.RootDir = "/var/lib/kubelet"
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	setDuration(&o.RelistPeriod, time.Second)
	setDuration(&o.ResyncPeriod, time.Minute)
	// As upstream's kubelet: the Lease is the heartbeat, so an unchanged status is
	// posted every 5 minutes; a status update frequency set alone is also the report
	// frequency, as before node leases.
	if o.NodeStatusUpdateFrequency > 0 {
		setDuration(&o.NodeStatusReportFrequency, o.NodeStatusUpdateFrequency)
	}
	setDuration(&o.NodeStatusUpdateFrequency, 10*time.Second)
	setDuration(&o.NodeStatusReportFrequency, 5*time.Minute)
	setDuration(&o.LeaseRenewInterval, 10*time.Second)
	setDuration(&o.FileCheckFrequency, 20*time.Second)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Logger = o.Logger.With("node", o.NodeName)
	o.nodeIPSpecified = o.NodeIP != ""
	if o.NodeIP == "" {
		ip, err := detectNodeIP()
		if err != nil {
			return err
		}
		o.NodeIP = ip
	}
	if net.ParseIP(o.NodeIP) == nil {
		return fmt.Errorf("kubelet: node IP %q is not an IP address", o.NodeIP)
	}
	if o.Machine == nil {
		m, err := readMachineInfo(o.RootDir)
		if err != nil {
			return err
		}
		o.Machine = m
	}
	return nil
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Kubelet is one running node agent.
type Kubelet struct {
	opts        Options
	log         *slog.Logger
	csi         *csi.Manager
	clock       clock.WithTickerAndDelayedExecution
	client      kubernetes.Interface
	runtime     cri.RuntimeService
	images      cri.ImageManagerService
	runtimeName string // prefix of container IDs in status, e.g. "containerd"
	// imageVolumesUnsupported says why the runtime cannot mount image volumes; "" if it can.
	imageVolumesUnsupported string
	podInformer             cache.SharedIndexInformer
	// services lists Services for containers' environment; nil only in unit tests that
	// build a Kubelet by hand.
	services       corelisters.ServiceLister
	servicesSynced cache.InformerSynced
	workers        *podWorkers
	backoff        *backoff
	statuses       *statusCache
	// statusWrites keeps pods as the kubelet's last status writes returned them,
	// until the watch catches up.
	statusWrites *statusWrites
	starts       *startGate
	// abandoned are the pods whose sandbox start was given up as they were deleted.
	abandoned abandonedStarts
	recorder  record.EventRecorder
	volumes   *volume.Manager
	// volumeSources reads (and briefly caches) the objects volumes and env refer to.
	volumeSources volumeSources
	static        *staticPods // nil without a manifest directory
	// pressure is the node-pressure eviction manager; nil when off (its methods
	// then report no pressure).
	pressure *eviction.Pressure
	imageGC  *eviction.ImageGC // with pressure: removes unused images under disk pressure
	// appArmor says whether the host enforces AppArmor (Options.AppArmor).
	appArmor bool
	// sysctls are the sysctls pods may set (Options.AllowedUnsafeSysctls).
	sysctls *sysctlAllowlist
	// strictSupplementalGroups says whether the runtime can run containers with only
	// the groups the pod names (supplementalGroupsPolicy Strict), as it last said.
	strictSupplementalGroups atomic.Bool
	// lastNodeStatus is the status last posted; owned by the node status goroutine.
	lastNodeStatus *v1.NodeStatus
}

// Run runs a kubelet until ctx ends. It returns an error only if it cannot start; the
// end of ctx is a clean stop.
func Run(ctx context.Context, opts Options) error {
	if err := opts.setDefaults(); err != nil {
		return err
	}
	// Everything of this kubelet derives from a context of its own. Each pod worker's
	// sync takes a child context and drops it, and a child is registered under its
	// parent's lock: many kubelets in one process (hollow nodes) deriving straight from
	// the caller's context would all take that one lock, once per pod sync (1,000
	// nodes of 30 pods: 24,000 goroutines waiting on it).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kl := &Kubelet{
		opts:         opts,
		log:          opts.Logger,
		clock:        opts.Clock,
		client:       opts.Client,
		runtime:      opts.Runtime,
		images:       opts.Images,
		backoff:      newBackoff(opts.Clock, 10*time.Second, 5*time.Minute),
		starts:       newStartGate(opts.ParallelStarts),
		statuses:     newStatusCache(),
		statusWrites: newStatusWrites(),
		appArmor:     opts.AppArmor != nil && *opts.AppArmor || opts.AppArmor == nil && hostEnforcesAppArmor(),
	}
	sysctls, err := newSysctlAllowlist(opts.AllowedUnsafeSysctls)
	if err != nil {
		return fmt.Errorf("kubelet: --allowed-unsafe-sysctls: %w", err)
	}
	kl.sysctls = sysctls
	logRotation, err := logrotate.New(logrotate.Options{
		Runtime: opts.Runtime, MaxSize: opts.ContainerLogMaxSize, MaxFiles: opts.ContainerLogMaxFiles,
		MaxWorkers: opts.ContainerLogMaxWorkers, MonitorInterval: opts.ContainerLogMonitorInterval,
		Clock: opts.Clock, Logger: opts.Logger,
	})
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	v, err := kl.runtime.Version(ctx, "v1")
	if err != nil {
		return fmt.Errorf("kubelet: container runtime not reachable: %w", err)
	}
	kl.recorder = opts.Events
	if kl.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kl.client.CoreV1().Events("")})
		defer b.Shutdown()
		kl.recorder = NewEventRecorder(b, opts.NodeName)
	}
	kl.runtimeName = v.RuntimeName
	kl.imageVolumesUnsupported = imageVolumeSupport(v.RuntimeName, v.RuntimeVersion)
	kl.volumeSources = volumeSources{kl: kl, objects: newObjectCache(opts.Clock, objectCacheTTL),
		configMaps: newConfigMapManager(kl.client, kl.pokePods), secrets: newSecretManager(kl.client, kl.pokePods)}
	defer kl.volumeSources.stopWatches()
	volOpts := volume.Options{RootDir: opts.RootDir, Sources: kl.volumeSources,
		Tmpfs: !opts.NoTmpfs, LocalPathDir: opts.LocalPathDir, Clock: opts.Clock, Logger: opts.Logger}
	if !opts.NoCSI {
		kl.csi = csi.NewManager(csi.Options{Client: kl.client, NodeName: opts.NodeName, RootDir: opts.RootDir, Logger: opts.Logger})
		// Made now, before the pod watch starts: nothing is created under RootDir once
		// the kubelet is up and running.
		if err := kl.csi.Prepare(); err != nil {
			return fmt.Errorf("kubelet: csi: %w", err)
		}
		volOpts.CSI = kl.csi
	}
	kl.volumes = volume.NewManager(volOpts)
	if opts.PodManifestPath != "" {
		// Read before the watch starts, so that a mirror pod it delivers is not taken
		// for an orphan, and before the first relist, so that running static pods are
		// adopted.
		kl.static = newStaticPods(opts.PodManifestPath, opts.NodeName)
		kl.static.reload(kl.clock.Now(), kl.manifestError)
	}

	if opts.NodePressure != nil && opts.EvictionMonitoringPeriod >= 0 {
		// Made before any pod worker, which asks it to admit pods.
		if kl.pressure, err = kl.newPressure(); err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
	}

	kl.services, kl.servicesSynced = opts.ServiceLister, opts.ServicesSynced
	if kl.services == nil {
		// Every namespace's Services, as upstream's kubelet watches them: a container
		// start then reads its service variables from memory, not the API.
		factory := informers.NewSharedInformerFactory(kl.client, 0)
		inf := factory.Core().V1().Services()
		kl.services, kl.servicesSynced = inf.Lister(), inf.Informer().HasSynced
		servicesCtx, stopServices := context.WithCancel(ctx)
		factory.Start(servicesCtx.Done())
		defer func() { stopServices(); factory.Shutdown() }() // also on an early error return
	}

	// The kubelet's own watch: only pods bound to this node.
	kl.podInformer = coreinformers.NewFilteredPodInformer(kl.client, metav1.NamespaceAll, 0,
		cache.Indexers{}, func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", opts.NodeName).String()
		})
	// The kubelet never reads a pod's managedFields, and a status written without them
	// keeps the stored ones: not caching them saves a node about a tenth of each pod.
	if err := kl.podInformer.SetTransform(dropManagedFields); err != nil {
		return err
	}
	kl.workers = newPodWorkers(ctx, kl)
	if _, err := kl.podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    kl.onPod,
		UpdateFunc: func(_, obj any) { kl.onPod(obj) },
		DeleteFunc: kl.onPodDeleted,
	}); err != nil {
		return err
	}
	if opts.NodeServer != nil {
		if err := kl.startNodeServer(ctx); err != nil {
			return err
		}
	}
	informerDone := make(chan struct{})
	go func() { defer close(informerDone); kl.podInformer.RunWithContext(ctx) }()
	// Run returns once the informer has stopped, so that no handler of a stopped
	// kubelet runs after it (beside the next kubelet on the same runtime, say).
	defer func() { cancel(); <-informerDone }()
	listing := kl.clock.Now()
	kl.log.Info("listing the node's pods")
	if !cache.WaitForCacheSync(ctx.Done(), kl.podInformer.HasSynced) {
		kl.workers.wait()
		return nil // ctx ended before the first list: a clean stop
	}
	kl.log.Info("listed the node's pods", "pods", len(kl.podInformer.GetStore().ListKeys()), "took", kl.clock.Since(listing).Round(time.Millisecond))

	if kl.static != nil {
		for _, pod := range kl.static.list() {
			kl.workers.dispatch(pod.UID, cacheKey(pod))
		}
		go kl.runStaticPods(ctx)
	}
	go kl.runNodeStatus(ctx)
	go kl.runPLEG(ctx)
	go kl.runOrphanSweep(ctx)
	if kl.csi != nil {
		go kl.csi.Run(ctx)
	}
	if kl.opts.LocalPathDir != "" {
		sweeper := &localpath.Sweeper{Client: kl.client, Dir: kl.opts.LocalPathDir, Period: localPathSweepPeriod, Logger: kl.log}
		go sweeper.Run(ctx)
	}
	go logRotation.Run(ctx)
	if kl.opts.EvictionMonitoringPeriod >= 0 {
		evictions, err := eviction.New(eviction.Options{
			Runtime: kl.runtime, Pods: kl.evictablePods, LogDir: kl.podLogDir,
			Evict: func(pod *v1.Pod, msg string) {
				kl.workers.evict(pod.UID, evictionRequest{message: msg, gracePeriod: eviction.GracePeriodSeconds})
			},
			EmptyDirPath: func(pod *v1.Pod, name string) string { return kl.volumes.EmptyDirPath(pod.UID, name) },
			Period:       kl.opts.EvictionMonitoringPeriod, Clock: kl.clock, Logger: kl.log,
		})
		if err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
		go evictions.Run(ctx)
	}
	if kl.pressure != nil {
		go kl.pressure.Run(ctx)
		go kl.imageGC.Run(ctx)
	}
	kl.log.Info("kubelet started", "runtime", v.RuntimeName+"://"+v.RuntimeVersion)
	if kl.imageVolumesUnsupported != "" {
		kl.log.Warn("pods with image volumes will not start", "why", kl.imageVolumesUnsupported)
	}
	<-ctx.Done()
	kl.workers.wait()
	return nil
}

// startNodeServer listens on the kubelet port and serves the node server until ctx ends.
func (kl *Kubelet) startNodeServer(ctx context.Context) error {
	so := *kl.opts.NodeServer
	so.Runtime, so.NodeName, so.Logger, so.RootDir = kl.runtime, kl.opts.NodeName, kl.log, kl.opts.RootDir
	so.Pods = kl.boundPods
	if so.Client == nil {
		so.Client = kl.client
	}
	so.PodVolumes = kl.podVolumes
	so.PodCgroup = cgroupParent
	if so.Address == "" {
		so.Address = net.JoinHostPort("", fmt.Sprint(kl.opts.Port))
	}
	srv, err := nodeserver.New(so)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", so.Address)
	if err != nil {
		return fmt.Errorf("kubelet: node server: %w", err)
	}
	go func() {
		if err := srv.Serve(ctx, l); err != nil {
			kl.log.Error("node server stopped", "err", err)
		}
	}()
	return nil
}

// boundPods returns the pods bound to this node from the watch cache.
func (kl *Kubelet) boundPods() []*v1.Pod {
	var pods []*v1.Pod
	for _, obj := range kl.podInformer.GetStore().List() {
		if pod, ok := obj.(*v1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	return pods
}

// evictablePods are the API's pods on this node that are still to run or running:
// those the eviction monitor measures.
func (kl *Kubelet) evictablePods() []*v1.Pod {
	var pods []*v1.Pod
	for _, pod := range kl.boundPods() {
		if pod.Spec.NodeName != kl.opts.NodeName || isMirrorPod(pod) || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		pods = append(pods, pod)
	}
	return pods
}

// newPressure makes the node-pressure eviction manager from the options, and
// kl.imageGC, with which it reclaims disk.
func (kl *Kubelet) newPressure() (*eviction.Pressure, error) {
	np := kl.opts.NodePressure
	measurer := np.Measurer
	if measurer == nil {
		host := eviction.HostOptions{
			RootDir: kl.opts.RootDir, Runtime: kl.runtime, Images: kl.images, LogDir: kl.podLogDir,
			EmptyDirPath: func(pod *v1.Pod, name string) string { return kl.volumes.EmptyDirPath(pod.UID, name) },
		}
		if kl.opts.PodCgroups != nil {
			host.PodProcesses = kl.opts.PodCgroups.PodProcesses
		}
		var err error
		if measurer, err = eviction.NewHost(host); err != nil {
			return nil, err
		}
	}
	var err error
	kl.imageGC, err = eviction.NewImageGC(eviction.ImageGCOptions{Runtime: kl.runtime, Images: kl.images, Clock: kl.clock, Logger: kl.log})
	if err != nil {
		return nil, err
	}
	return eviction.NewPressure(eviction.PressureOptions{
		Thresholds: np.Thresholds, MaxPodGracePeriodSeconds: np.MaxPodGracePeriodSeconds,
		TransitionPeriod: np.TransitionPeriod, Measurer: measurer, Reclaimer: kl.imageGC,
		Pods: kl.evictablePods,
		Evict: func(pod *v1.Pod, grace int64, msg string) {
			kl.workers.evict(pod.UID, evictionRequest{message: msg, gracePeriod: grace, nodePressure: true})
		},
		Period: kl.opts.EvictionMonitoringPeriod, Clock: kl.clock, Logger: kl.log,
	})
}

// admitUnderPressure refuses a pod new to the node while the node is under pressure,
// as upstream's eviction admission does (see eviction.Pressure.Admit); like admit it
// never re-checks a pod that has started.
func (kl *Kubelet) admitUnderPressure(pod *v1.Pod) (string, string) {
	if pod.Status.StartTime != nil || pod.Status.Phase != v1.PodPending && pod.Status.Phase != "" {
		return "", ""
	}
	return kl.pressure.Admit(pod)
}

// onPod dispatches an informer event to the pod's worker.
func (kl *Kubelet) onPod(obj any) { kl.handlePod(obj, false) }

// onPodDeleted drops the pod's ConfigMap and Secret watches (its worker, which may
// still be stopping containers, needs them no more) and dispatches the deletion.
func (kl *Kubelet) onPodDeleted(obj any) { kl.handlePod(obj, true) }

// handlePod follows (or, once deleted, stops following) the ConfigMaps and Secrets
// of a pod bound to this node, and wakes its worker.
func (kl *Kubelet) handlePod(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName != kl.opts.NodeName {
		return
	}
	if isMirrorPod(pod) {
		kl.onMirrorPod(pod)
		return
	}
	if deleted {
		kl.volumeSources.unregister(pod.UID)
		kl.statusWrites.forget(pod.UID)
	} else {
		kl.volumeSources.register(pod)
	}
	if deleted || pod.DeletionTimestamp != nil {
		// Stop starting it (a slot of the start gate, pulls, a sandbox) at once.
		kl.workers.terminate(pod.UID)
	} else if kl.statusWrites.isResultOfLastWrite(pod) {
		// The watch returning the kubelet's own status write holds nothing its worker
		// has not seen (a status write changes neither spec nor metadata), as upstream's
		// kubelet does not sync a pod whose status alone changed.
		return
	}
	kl.workers.dispatch(pod.UID, pod.Namespace+"/"+pod.Name)
}

// pokePods wakes the workers of these pods: a ConfigMap or Secret they refer to
// changed, so that its volumes are rewritten (and a container waiting for it starts)
// now rather than on the pods' periodic resync. Upstream waits for that resync.
func (kl *Kubelet) pokePods(uids []types.UID) {
	for _, uid := range uids {
		kl.workers.poke(uid)
	}
}

// getPod returns the pod with this key and UID from the watch cache, or nil.
func (kl *Kubelet) getPod(key string, uid string) *v1.Pod {
	if pod := kl.staticPod(types.UID(uid)); pod != nil {
		return pod
	}
	obj, exists, err := kl.podInformer.GetStore().GetByKey(key)
	if err != nil || !exists {
		return nil
	}
	pod := obj.(*v1.Pod)
	if string(pod.UID) != uid || pod.Spec.NodeName != kl.opts.NodeName || isMirrorPod(pod) {
		return nil
	}
	return pod
}

// runOrphanSweep removes what is left of forgotten pods every orphanSweepPeriod. Each
// pod's periodic sync is its worker's own timer (see podWorkers).
func (kl *Kubelet) runOrphanSweep(ctx context.Context) {
	t := kl.clock.NewTicker(orphanSweepPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			kl.removeOrphans(ctx)
		}
	}
}

// removeOrphans removes what is left of pods the kubelet no longer knows (not in the
// API nor a static pod, without a worker and without a sandbox: deleted while the
// kubelet was down, say): their cgroups, then their directories. Only the cgroups of
// pods with a directory under this kubelet's root are its own: other kubelets on the
// host (test clusters, hollow nodes) keep theirs in the same hierarchy. So a pod's
// directory goes only once its cgroup has: a cgroup still busy is tried again on the
// next sweep.
func (kl *Kubelet) removeOrphans(ctx context.Context) {
	onDisk, err := kl.volumes.PodsOnDisk()
	if err != nil {
		kl.log.Error("listing pod directories", "err", err)
	}
	if len(onDisk) == 0 {
		return
	}
	known := map[types.UID]bool{}
	for _, obj := range kl.podInformer.GetStore().List() {
		known[obj.(*v1.Pod).UID] = true
	}
	if kl.static != nil {
		for _, pod := range kl.static.list() {
			known[pod.UID] = true
		}
	}
	sandboxes, err := kl.runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return
	}
	for _, sb := range sandboxes {
		known[types.UID(sb.GetMetadata().GetUid())] = true
	}
	for _, uid := range onDisk {
		if known[uid] || kl.workers.has(uid) {
			continue
		}
		if err := kl.removePodCgroupAndDir(ctx, uid); err != nil {
			kl.log.Error("removing an orphaned pod directory", "uid", uid, "err", err)
		}
	}
}

// removePodCgroupAndDir removes the pod's cgroup, then its directory under the root.
// A cgroup still busy (a container's cgroup or a process still in it: rmdir's EBUSY)
// keeps the directory, without its volumes: the directory is what tells the orphan
// sweep, which tries again, that the cgroup is this kubelet's own. So does a sandbox
// start given up not long ago, which the runtime may still be making.
func (kl *Kubelet) removePodCgroupAndDir(ctx context.Context, uid types.UID) error {
	if kl.opts.PodCgroups != nil {
		if kl.abandoned.runtimeMayStillStart(uid, kl.clock.Now()) {
			// The runtime may yet create the pod's cgroup: the sweep removes it later.
			return kl.volumes.TearDownVolumes(ctx, uid)
		}
		if err := kl.opts.PodCgroups.RemovePod(uid); err != nil {
			kl.log.Error("removing the pod's cgroup; the orphan sweep retries", "uid", uid, "err", err)
			return kl.volumes.TearDownVolumes(ctx, uid)
		}
	}
	return kl.volumes.TearDown(ctx, uid)
}

// nodeAllocatable returns the node's allocatable resources, used as the default for
// resourceFieldRef limits.
func (kl *Kubelet) nodeAllocatable() v1.ResourceList {
	m := kl.opts.Machine
	return v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(m.CPUCores, resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(m.MemoryBytes, resource.BinarySI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(m.EphemeralStorage, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(kl.opts.MaxPods, resource.DecimalSI),
		"hugepages-1Gi":             *resource.NewQuantity(0, resource.BinarySI),
		"hugepages-2Mi":             *resource.NewQuantity(0, resource.BinarySI),
	}
}

// cacheKey is the namespace/name key of a pod in the watch cache.
func cacheKey(obj any) string {
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	return key
}

// NewEventRecorder makes the recorder of the kubelet on node from a broadcaster.
func NewEventRecorder(b record.EventBroadcaster, node string) record.EventRecorder {
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: node})
}

// formatPod names a pod in messages as upstream's kubelet does: name_namespace(uid).
func formatPod(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// containerRef is the object reference events about one of the pod's containers name.
func containerRef(pod *v1.Pod, container string) *v1.ObjectReference {
	ref := &v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion,
	}
	if container == "" {
		return ref
	}
	ref.FieldPath = "spec.containers{" + container + "}"
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			ref.FieldPath = "spec.initContainers{" + container + "}"
		}
	}
	return ref
}

// dropManagedFields is the pod informer's transform: the pod is cached without its
// managedFields (tombstones pass unchanged).
func dropManagedFields(obj any) (any, error) {
	if pod, ok := obj.(*v1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}
