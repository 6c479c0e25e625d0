package kubelet

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/hostaddr"
	"mizzen/internal/localpath"
	"mizzen/internal/podfit"
)

// Well-known node labels the kubelet sets on registration, as upstream does.
const (
	labelHostname  = "kubernetes.io/hostname"
	labelOS        = "kubernetes.io/os"
	labelArch      = "kubernetes.io/arch"
	labelBetaOS    = "beta.kubernetes.io/os"
	labelBetaArch  = "beta.kubernetes.io/arch"
	nodeLeaseNS    = "kube-node-lease"
	readyMessage   = "kubelet is posting ready status"
	notReadyReason = "KubeletNotReady"
	readyReason    = "KubeletReady"
)

// runNodeStatus registers the node, then keeps its status and Lease fresh until ctx ends.
func (kl *Kubelet) runNodeStatus(ctx context.Context) {
	var node *v1.Node
	for node == nil {
		n, err := kl.registerNode(ctx)
		if err == nil {
			node = n
			break
		}
		kl.log.Error("registering node", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-kl.clock.After(kl.opts.NodeStatusUpdateFrequency):
		}
	}
	kl.log.Info("node registered")
	kl.recorder.Eventf(kl.nodeRef(), v1.EventTypeNormal, "Starting", "Starting kubelet.")
	go kl.runLease(ctx, node.UID)
	go kl.watchOwnNode(ctx)

	// Registration posted a full status: the first periodic report is shifted at random.
	reports := newStatusReportSchedule(kl.opts.NodeStatusReportFrequency, kl.clock.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-kl.clock.After(jittered(kl.opts.NodeStatusUpdateFrequency)):
		}
		force := reports.due(kl.clock.Now())
		posted, err := kl.updateNodeStatus(ctx, force)
		if err != nil {
			kl.log.Error("updating node status", "err", err)
			continue
		}
		if posted {
			reports.posted(kl.clock.Now(), force)
		}
	}
}

// initialNode is the Node object the kubelet registers.
func (kl *Kubelet) initialNode() *v1.Node {
	labels := map[string]string{
		labelHostname: kl.opts.Hostname,
		labelOS:       runtime.GOOS,
		labelArch:     runtime.GOARCH,
		labelBetaOS:   runtime.GOOS,
		labelBetaArch: runtime.GOARCH,
	}
	for k, v := range kl.opts.NodeLabels {
		labels[k] = v
	}
	annotations := map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
	if kl.opts.LocalPathDir != "" {
		annotations[localpath.NodeDirAnnotation] = kl.opts.LocalPathDir
	}
	taints := slices.Clone(kl.opts.RegisterWithTaints)
	if kl.opts.ExternalCloudProvider {
		taints = append(taints, v1.Taint{Key: taintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule})
		if kl.opts.nodeIPSpecified {
			annotations[annotationProvidedNodeIP] = kl.opts.NodeIP
		}
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        kl.opts.NodeName,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: v1.NodeSpec{Taints: taints},
	}
}

// registerNode creates the Node or, if it exists, reconciles the labels the kubelet owns.
// Either way it then posts a full status.
func (kl *Kubelet) registerNode(ctx context.Context) (*v1.Node, error) {
	want := kl.initialNode()
	kl.setNodeStatus(ctx, want, nil)
	node, err := kl.client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			existing, err := kl.client.CoreV1().Nodes().Get(ctx, kl.opts.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			changed := false
			if existing.Labels == nil {
				existing.Labels = map[string]string{}
			}
			for k, v := range want.Labels {
				if existing.Labels[k] != v {
					existing.Labels[k] = v
					changed = true
				}
			}
			if dir := want.Annotations[localpath.NodeDirAnnotation]; dir != "" && existing.Annotations[localpath.NodeDirAnnotation] != dir {
				if existing.Annotations == nil {
					existing.Annotations = map[string]string{}
				}
				existing.Annotations[localpath.NodeDirAnnotation] = dir
				changed = true
			}
			node = existing
			if changed {
				node, err = kl.client.CoreV1().Nodes().Update(ctx, existing, metav1.UpdateOptions{})
			}
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	if _, err := kl.updateNodeStatus(ctx, true); err != nil {
		return nil, err
	}
	return node, nil
}

// updateNodeStatus computes the node status and posts it when it differs from what was
// last posted, or when force is set. It reports whether it posted. Unchanged status costs
// no API call.
func (kl *Kubelet) updateNodeStatus(ctx context.Context, force bool) (bool, error) {
	if !force && kl.lastNodeStatus != nil {
		// The probe starts from what was posted, so the extended resources kept
		// from it compare equal.
		probe := &v1.Node{Status: v1.NodeStatus{Capacity: kl.lastNodeStatus.Capacity.DeepCopy()}}
		kl.setNodeStatus(ctx, probe, kl.lastNodeStatus)
		if nodeStatusEquivalent(kl.lastNodeStatus, &probe.Status) {
			return false, nil
		}
	}
	// The first try reads the node from the apiserver's cache (resourceVersion "0"), as
	// upstream's kubelet does: a consistent read waits for etcd and the cache to agree,
	// which under load is the slowest part of a heartbeat. A stale node fails the
	// update with a conflict, and the retries read the latest. A cache behind the
	// node's creation (registration's status post, under load) does not have it yet:
	// a failed cached read is retried at once as a consistent one, as upstream's
	// kubelet retries any failed try.
	opts := metav1.GetOptions{ResourceVersion: "0"}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := kl.client.CoreV1().Nodes().Get(ctx, kl.opts.NodeName, opts)
		if err != nil && opts.ResourceVersion != "" && ctx.Err() == nil {
			node, err = kl.client.CoreV1().Nodes().Get(ctx, kl.opts.NodeName, metav1.GetOptions{})
		}
		opts.ResourceVersion = ""
		if err != nil {
			return err
		}
		previous := node.Status.DeepCopy()
		kl.setNodeStatus(ctx, node, previous)
		updated, err := kl.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if err == nil {
			kl.lastNodeStatus = updated.Status.DeepCopy()
			kl.recordPressureEvents(previous, &updated.Status)
		}
		return err
	})
	return err == nil, err
}

// nodeStatusEquivalent compares statuses ignoring heartbeat times.
func nodeStatusEquivalent(a, b *v1.NodeStatus) bool {
	strip := func(s *v1.NodeStatus) *v1.NodeStatus {
		c := s.DeepCopy()
		for i := range c.Conditions {
			c.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return c
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// setNodeStatus fills node.Status from the machine and the runtime; old carries the
// previous conditions so transition times survive.
func (kl *Kubelet) setNodeStatus(ctx context.Context, node *v1.Node, old *v1.NodeStatus) {
	m := kl.opts.Machine
	node.Status.Capacity, node.Status.Allocatable = withExtendedResources(kl.nodeAllocatable(), node.Status.Capacity)
	node.Status.Addresses = kl.nodeAddresses(old)
	node.Status.DaemonEndpoints = v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: kl.opts.Port}}
	info := v1.NodeSystemInfo{
		MachineID:       m.MachineID,
		SystemUUID:      m.SystemUUID,
		BootID:          m.BootID,
		KernelVersion:   m.KernelVersion,
		OSImage:         m.OSImage,
		OperatingSystem: runtime.GOOS,
		Architecture:    runtime.GOARCH,
		KubeletVersion:  kl.opts.KubeletVersion,
	}
	runtimeReady, notReadyMsg := true, ""
	if v, err := kl.runtime.Version(ctx, "v1"); err == nil {
		info.ContainerRuntimeVersion = v.RuntimeName + "://" + v.RuntimeVersion
	} else {
		runtimeReady, notReadyMsg = false, "container runtime is down"
	}
	if runtimeReady {
		runtimeReady, notReadyMsg = kl.runtimeReadiness(ctx)
	}
	node.Status.NodeInfo = info
	node.Status.Images = kl.nodeImages(ctx)
	// What the runtime can do that pods may ask for: Strict supplemental groups
	// (containerd 2.0 and later), as upstream's kubelet reports it.
	node.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: ptrBool(kl.strictSupplementalGroups.Load())}

	now := metav1.NewTime(kl.clock.Now())
	var oldConds []v1.NodeCondition
	if old != nil {
		oldConds = old.Conditions
	}
	cond := func(t v1.NodeConditionType, s v1.ConditionStatus, reason, msg string) v1.NodeCondition {
		c := v1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, o := range oldConds {
			if o.Type == t && o.Status == s {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		return c
	}
	ready := cond(v1.NodeReady, v1.ConditionTrue, readyReason, readyMessage)
	if !runtimeReady {
		ready = cond(v1.NodeReady, v1.ConditionFalse, notReadyReason, notReadyMsg)
	}
	pressure := kl.pressure.Conditions()
	pressureCond := func(t v1.NodeConditionType, falseReason, falseMsg, trueReason, trueMsg string) v1.NodeCondition {
		if slices.Contains(pressure, t) {
			return cond(t, v1.ConditionTrue, trueReason, trueMsg)
		}
		return cond(t, v1.ConditionFalse, falseReason, falseMsg)
	}
	// Conditions of other owners (the route controller's NetworkUnavailable) stay.
	var others []v1.NodeCondition
	for _, c := range oldConds {
		switch c.Type {
		case v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure:
		default:
			others = append(others, c)
		}
	}
	node.Status.Conditions = []v1.NodeCondition{
		pressureCond(v1.NodeMemoryPressure, "KubeletHasSufficientMemory", "kubelet has sufficient memory available",
			"KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
		pressureCond(v1.NodeDiskPressure, "KubeletHasNoDiskPressure", "kubelet has no disk pressure",
			"KubeletHasDiskPressure", "kubelet has disk pressure"),
		pressureCond(v1.NodePIDPressure, "KubeletHasSufficientPID", "kubelet has sufficient PID available",
			"KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
		ready,
	}
	node.Status.Conditions = append(others, node.Status.Conditions...)
}

// Names shared with the cloud-controller-manager (internal/cloud), as upstream's.
const (
	taintExternalCloudProvider = "node.cloudprovider.kubernetes.io/uninitialized"
	annotationProvidedNodeIP   = "alpha.kubernetes.io/provided-node-ip"
)

// nodeAddresses are the addresses to post. With an external cloud provider they are
// the provider's once it has set them (old holds them), and until then the given
// --node-ip only, as upstream.
func (kl *Kubelet) nodeAddresses(old *v1.NodeStatus) []v1.NodeAddress {
	if kl.opts.ExternalCloudProvider {
		if old != nil && len(old.Addresses) > 0 {
			return old.Addresses
		}
		if !kl.opts.nodeIPSpecified {
			return nil
		}
	}
	return []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: kl.opts.NodeIP},
		{Type: v1.NodeHostName, Address: kl.opts.Hostname},
	}
}

// pressureEvent is the node event upstream's kubelet records when a pressure
// condition turns True (under) or False.
func pressureEvent(t v1.NodeConditionType, under bool) string {
	switch {
	case t == v1.NodeMemoryPressure && under:
		return "NodeHasInsufficientMemory"
	case t == v1.NodeMemoryPressure:
		return "NodeHasSufficientMemory"
	case t == v1.NodeDiskPressure && under:
		return "NodeHasDiskPressure"
	case t == v1.NodeDiskPressure:
		return "NodeHasNoDiskPressure"
	case under:
		return "NodeHasInsufficientPID"
	}
	return "NodeHasSufficientPID"
}

// recordPressureEvents records an event for each pressure condition whose status
// changed between the posted statuses (a condition not posted before counts as False).
func (kl *Kubelet) recordPressureEvents(old, cur *v1.NodeStatus) {
	status := func(s *v1.NodeStatus, t v1.NodeConditionType) v1.ConditionStatus {
		for _, c := range s.Conditions {
			if c.Type == t {
				return c.Status
			}
		}
		return v1.ConditionFalse
	}
	ref := kl.nodeRef()
	for _, t := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		was, is := status(old, t), status(cur, t)
		if was == is {
			continue
		}
		event := pressureEvent(t, is == v1.ConditionTrue)
		kl.recorder.Eventf(ref, v1.EventTypeNormal, event, "Node %s status is now: %s", kl.opts.NodeName, event)
	}
}

// maxNodeImages caps status.images, as upstream's default does.
const maxNodeImages = 50

// nodeImages lists the images on the node, largest first, for the scheduler's image
// locality scoring.
func (kl *Kubelet) nodeImages(ctx context.Context) []v1.ContainerImage {
	imgs, err := kl.images.ListImages(ctx, nil)
	if err != nil {
		return nil
	}
	sort.SliceStable(imgs, func(i, j int) bool { return imgs[i].Size > imgs[j].Size })
	var out []v1.ContainerImage
	for _, img := range imgs {
		if len(out) == maxNodeImages {
			break
		}
		names := append(slices.Clone(img.RepoDigests), img.RepoTags...)
		if len(names) == 0 {
			continue
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.Size)})
	}
	return out
}

// nodeRef is what the kubelet's node events are about, as upstream's kubelet refers to
// its node (the name as the UID).
func (kl *Kubelet) nodeRef() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: kl.opts.NodeName, UID: types.UID(kl.opts.NodeName)}
}

// watchOwnNode watches the kubelet's own Node, as upstream's kubelet's node informer:
// it records NodeNotSchedulable and NodeSchedulable when the node is cordoned and
// uncordoned (a cordoned node says so once when the kubelet starts, as upstream's, which
// starts from schedulable), and reports spec.podCIDR changes to PodCIDRChanged.
func (kl *Kubelet) watchOwnNode(ctx context.Context) {
	inf := coreinformers.NewFilteredNodeInformer(kl.client, 0, cache.Indexers{}, func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", kl.opts.NodeName).String()
	})
	ref := kl.nodeRef()
	// Handlers of one informer run one at a time: these need no lock.
	podCIDR, unschedulable := "", false
	report := func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok || n.Name != kl.opts.NodeName {
			return
		}
		if n.Spec.Unschedulable != unschedulable {
			unschedulable = n.Spec.Unschedulable
			event := "NodeSchedulable"
			if unschedulable {
				event = "NodeNotSchedulable"
			}
			kl.recorder.Eventf(ref, v1.EventTypeNormal, event, "Node %s status is now: %s", kl.opts.NodeName, event)
		}
		if kl.opts.PodCIDRChanged != nil && n.Spec.PodCIDR != "" && n.Spec.PodCIDR != podCIDR {
			podCIDR = n.Spec.PodCIDR
			kl.log.Info("pod CIDR assigned", "podCIDR", podCIDR)
			kl.opts.PodCIDRChanged(podCIDR)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    report,
		UpdateFunc: func(_, obj any) { report(obj) },
	})
	inf.RunWithContext(ctx)
}

// runtimeReadiness checks the runtime's RuntimeReady and NetworkReady conditions and
// returns the NotReady message upstream writes when one is false.
func (kl *Kubelet) runtimeReadiness(ctx context.Context) (bool, string) {
	st, err := kl.runtime.Status(ctx, false)
	if err != nil {
		return false, "container runtime status check may not have completed yet"
	}
	kl.strictSupplementalGroups.Store(st.GetFeatures().GetSupplementalGroupsPolicy())
	for _, want := range []string{runtimeapi.RuntimeReady, runtimeapi.NetworkReady} {
		found := false
		for _, c := range st.GetStatus().GetConditions() {
			if c.Type != want {
				continue
			}
			found = true
			if !c.Status {
				if want == runtimeapi.NetworkReady {
					return false, fmt.Sprintf("container runtime network not ready: NetworkReady=false reason:%s message:%s", c.Reason, c.Message)
				}
				return false, fmt.Sprintf("container runtime not ready: RuntimeReady=false reason:%s message:%s", c.Reason, c.Message)
			}
		}
		if !found {
			return false, fmt.Sprintf("container runtime did not report condition %s", want)
		}
	}
	return true, ""
}

// detectNodeIP picks the first global unicast IPv4 address of an up interface.
func detectNodeIP() (string, error) {
	ip, err := hostaddr.PrimaryIPv4()
	if err != nil {
		return "", fmt.Errorf("detecting node IP: %w; pass a node IP", err)
	}
	return ip.String(), nil
}

// readMachineInfo reads the host's hardware and OS facts; ephemeral storage is the size
// of the filesystem holding rootDir (or / while rootDir does not exist yet).
func readMachineInfo(rootDir string) (*MachineInfo, error) {
	m := &MachineInfo{CPUCores: int64(runtime.NumCPU())}
	mem, err := memTotal()
	if err != nil {
		return nil, err
	}
	m.MemoryBytes = mem
	var st unix.Statfs_t
	if err := unix.Statfs(rootDir, &st); err == nil {
		m.EphemeralStorage = int64(st.Blocks) * st.Bsize
	} else if err := unix.Statfs("/", &st); err == nil {
		m.EphemeralStorage = int64(st.Blocks) * st.Bsize
	}
	m.MachineID = readTrimmed("/etc/machine-id")
	m.SystemUUID = readTrimmed("/sys/class/dmi/id/product_uuid")
	m.BootID = readTrimmed("/proc/sys/kernel/random/boot_id")
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		m.KernelVersion = unix.ByteSliceToString(uts.Release[:])
	}
	m.OSImage = osImage()
	return m, nil
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("reading memory size: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb * 1024, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("reading memory size: no MemTotal in /proc/meminfo")
}

func osImage() string {
	for _, line := range strings.Split(readTrimmed("/etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Unknown"
}

// nodeOwnerRef makes the Node own its Lease, so deleting the Node deletes the Lease.
func nodeOwnerRef(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: name, UID: uid}
}

// withExtendedResources returns the node's capacity and allocatable: the kubelet's own
// resources, plus the extended resources (example.com/foo) a client advertised in the
// node's status capacity, which the kubelet keeps as upstream's does (it manages no
// device plugins, so it has none of its own to remove). Allocatable mirrors capacity:
// the kubelet reserves nothing.
func withExtendedResources(own, posted v1.ResourceList) (capacity, allocatable v1.ResourceList) {
	capacity = own.DeepCopy()
	for name, q := range posted {
		if _, mine := capacity[name]; !mine && podfit.IsExtendedResourceName(name) {
			capacity[name] = q.DeepCopy()
		}
	}
	return capacity, capacity.DeepCopy()
}
