package podnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Options configure a node's pod network component.
type Options struct {
	Client   kubernetes.Interface
	NodeName string
	Mode     Mode
	// ClusterCIDR holds every node's pod CIDR; routes outside it are never touched.
	ClusterCIDR netip.Prefix
	// Bridge is the node's pod bridge; the vxlan device is named after it.
	Bridge string
	// VNI and Port are the vxlan backend's (DefaultVNI and DefaultPort when zero).
	VNI, Port int
	// Resync is how often everything is reprogrammed from the informer's state even
	// without a change (30 s when zero): something else may have removed an entry.
	Resync time.Duration
	// Handle is the netlink handle of the namespace to program: this process's when
	// nil, and then IPv4 forwarding is turned on too (with a Handle, that is the
	// caller's job).
	Handle *netlink.Handle
	Log    *slog.Logger
}

// Reason strings of the NetworkUnavailable condition and of the Node's events.
const (
	ReasonReady       = "PodNetworkReady"
	ReasonUnreachable = "PodNetworkUnreachable"
	ReasonError       = "PodNetworkError"
)

// Run programs the pod network until ctx ends. Failures to program are reported on the
// Node and retried; only bad options end it early.
func Run(ctx context.Context, opts Options) error {
	if opts.Mode == None {
		return nil
	}
	if _, err := ParseMode(string(opts.Mode)); err != nil {
		return err
	}
	if !opts.ClusterCIDR.IsValid() || !opts.ClusterCIDR.Addr().Is4() {
		return fmt.Errorf("--pod-network %s needs an IPv4 --cluster-cidr", opts.Mode)
	}
	if opts.VNI == 0 {
		opts.VNI = DefaultVNI
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	if opts.Resync == 0 {
		opts.Resync = 30 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	h := opts.Handle
	if h == nil {
		var err error
		if h, err = netlink.NewHandle(); err != nil {
			return err
		}
		defer h.Close()
	}
	r := &reconciler{opts: opts, log: opts.Log.With("component", "podnet"),
		prog: &programmer{h: h, dev: DeviceName(opts.Bridge), vni: opts.VNI, port: opts.Port, cluster: opts.ClusterCIDR.Masked()}}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: opts.Client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	r.recorder = broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "podnet", Host: opts.NodeName})

	factory := informers.NewSharedInformerFactory(opts.Client, 0)
	nodes := factory.Core().V1().Nodes()
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return ctx.Err()
	}
	ticker := time.NewTicker(opts.Resync)
	defer ticker.Stop()
	for {
		all, err := nodes.Lister().List(labels.Everything())
		if err == nil {
			r.reconcile(ctx, all)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-ticker.C:
		}
	}
}

// reconciler holds what the last pass reported, so that the Node is written only when
// that changes.
type reconciler struct {
	opts     Options
	log      *slog.Logger
	prog     *programmer
	recorder record.EventRecorder
	reported string
}

// reconcile programs this machine for the nodes as they are now, then reports.
func (r *reconciler) reconcile(ctx context.Context, nodes []*v1.Node) {
	var me *v1.Node
	for _, n := range nodes {
		if n.Name == r.opts.NodeName {
			me = n
		}
	}
	if me == nil {
		return // not registered yet
	}
	mine, ok := selfOf(me)
	if !ok {
		return // no pod CIDR or address yet
	}
	var errs []error
	if r.opts.Handle == nil { // another namespace's forwarding is the caller's
		if err := enableForwarding(); err != nil {
			errs = append(errs, fmt.Errorf("enabling IPv4 forwarding: %w", err))
		}
	}
	p := makePlan(r.opts.Mode, r.opts.NodeName, mine.NodeIP, nodes, r.prog.directlyReachable)
	switch r.opts.Mode {
	case VXLAN:
		if p.Others == 0 && !r.prog.hasVXLAN() {
			// Alone on the network so far: no device yet (a single-node cluster never
			// needs one), only the backend published.
			if err := r.publish(ctx, me, "", ""); err != nil {
				errs = append(errs, err)
			}
			break
		}
		link, err := r.prog.ensureVXLAN(mine)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if err := r.publish(ctx, me, link.Attrs().HardwareAddr.String(), mine.NodeIP.String()); err != nil {
			errs = append(errs, fmt.Errorf("publishing the VXLAN endpoint: %w", err))
		}
		if err := r.prog.syncVXLANPeers(link, p.Peers); err != nil {
			errs = append(errs, err)
		}
	case HostGW:
		if err := r.prog.removeVXLAN(); err != nil {
			errs = append(errs, err)
		}
		if err := r.prog.syncRoutes(hostGWRoutes(p.Peers)); err != nil {
			errs = append(errs, err)
		}
		if err := r.publish(ctx, me, "", ""); err != nil {
			errs = append(errs, err)
		}
	}
	r.report(ctx, me, p, errors.Join(errs...))
}

// publish writes the node's backend and VXLAN endpoint into its annotations, when
// they differ (mac empty: only the backend, and no endpoint).
func (r *reconciler) publish(ctx context.Context, me *v1.Node, mac, publicIP string) error {
	want := map[string]*string{AnnotationBackend: ptr(string(r.opts.Mode)), AnnotationVTEPMAC: nil, AnnotationPublicIP: nil}
	if mac != "" {
		want[AnnotationVTEPMAC], want[AnnotationPublicIP] = &mac, &publicIP
	}
	same := true
	for k, v := range want {
		have, ok := me.Annotations[k]
		if (v == nil) == ok || (v != nil && *v != have) {
			same = false
		}
	}
	if same {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
	_, err := r.opts.Client.CoreV1().Nodes().Patch(ctx, me.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// report sets the Node's NetworkUnavailable condition (False when every node with a pod
// CIDR is reachable and nothing failed) and records a Warning event when a problem is
// new.
func (r *reconciler) report(ctx context.Context, me *v1.Node, p plan, failed error) {
	status, reason := v1.ConditionFalse, ReasonReady
	msg := fmt.Sprintf("the %s pod network reaches the pods of %d other nodes", r.opts.Mode, len(p.Peers))
	switch {
	case failed != nil:
		status, reason, msg = v1.ConditionTrue, ReasonError, fmt.Sprintf("programming the %s pod network: %v", r.opts.Mode, failed)
	case len(p.Problems) > 0:
		status, reason, msg = v1.ConditionTrue, ReasonUnreachable, strings.Join(p.Problems, "; ")
	}
	if status == v1.ConditionTrue && msg != r.reported {
		r.log.Warn("pod network", "reason", reason, "message", msg)
		r.recorder.Event(&v1.ObjectReference{Kind: "Node", Name: me.Name, UID: types.UID(me.Name)}, v1.EventTypeWarning, reason, msg)
	}
	r.reported = msg
	now := metav1.Now()
	cond := v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: status, Reason: reason, Message: msg,
		LastHeartbeatTime: now, LastTransitionTime: now}
	for _, c := range me.Status.Conditions {
		if c.Type != v1.NodeNetworkUnavailable {
			continue
		}
		if c.Status == status && c.Reason == reason && c.Message == msg {
			return
		}
		if c.Status == status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.NodeCondition{cond}}})
	if _, err := r.opts.Client.CoreV1().Nodes().Patch(ctx, me.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		r.log.Error("setting the node's NetworkUnavailable condition", "err", err)
	}
}

func ptr[T any](v T) *T { return &v }
