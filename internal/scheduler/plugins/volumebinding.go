package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"mizzen/internal/scheduler/framework"
)

// Reasons shown by VolumeBinding, as upstream.
const (
	ErrReasonBindConflict        = "node(s) didn't find available persistent volumes to bind"
	ErrReasonNodeConflict        = "node(s) had volume node affinity conflict"
	ErrReasonUnboundImmediatePVC = "pod has unbound immediate PersistentVolumeClaims"
	// AnnSelectedNode tells an external provisioner where the consumer was scheduled.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	noProvisioner   = "kubernetes.io/no-provisioner"
)

// VolumeBindingArgs is the plugin's configuration.
type VolumeBindingArgs struct {
	BindTimeoutSeconds *int64 `json:"bindTimeoutSeconds,omitempty"`
}

// VolumeBinding checks that bound claims' volumes are reachable from the node and, for
// WaitForFirstConsumer claims, that a matching volume exists or can be provisioned there;
// at PreBind it binds the chosen volumes (or asks for provisioning) and waits for the
// claims to be bound.
type VolumeBinding struct {
	handle      framework.Handle
	pvcs        corelisters.PersistentVolumeClaimLister
	pvs         corelisters.PersistentVolumeLister
	classes     storagelisters.StorageClassLister
	bindTimeout time.Duration
}

var (
	_ framework.PreFilterPlugin   = (*VolumeBinding)(nil)
	_ framework.FilterPlugin      = (*VolumeBinding)(nil)
	_ framework.ReservePlugin     = (*VolumeBinding)(nil)
	_ framework.PreBindPlugin     = (*VolumeBinding)(nil)
	_ framework.EnqueueExtensions = (*VolumeBinding)(nil)
)

// NewVolumeBinding is the plugin factory.
func NewVolumeBinding(raw json.RawMessage, h framework.Handle) (framework.Plugin, error) {
	var args VolumeBindingArgs
	if err := decodeArgs(raw, VolumeBindingName, &args); err != nil {
		return nil, err
	}
	timeout := int64(600)
	if args.BindTimeoutSeconds != nil {
		timeout = *args.BindTimeoutSeconds
	}
	pl := &VolumeBinding{handle: h, bindTimeout: time.Duration(timeout) * time.Second}
	if h != nil && h.SharedInformerFactory() != nil {
		f := h.SharedInformerFactory()
		pl.pvcs = f.Core().V1().PersistentVolumeClaims().Lister()
		pl.pvs = f.Core().V1().PersistentVolumes().Lister()
		pl.classes = f.Storage().V1().StorageClasses().Lister()
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*VolumeBinding) Name() string { return VolumeBindingName }

// EventsToRegister: claims, volumes and classes appear or change; nodes appear or are
// relabelled (volume node affinity).
func (*VolumeBinding) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add | framework.Update}},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Add | framework.Update}},
		{Event: framework.ClusterEvent{Resource: framework.StorageClass, ActionType: framework.Add | framework.Update}},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel}},
	}
}

type volumeState struct {
	mu       sync.Mutex
	boundPVs []*v1.PersistentVolume
	delayed  []*v1.PersistentVolumeClaim
	// decisions per node: claim key -> PV name, or "" for dynamic provisioning.
	decisions map[string]map[string]string
	chosen    map[string]string
}

func (s *volumeState) Clone() framework.StateData { return s }

const volumeBindingKey framework.StateKey = "PreFilter" + VolumeBindingName

func claimKey(pvc *v1.PersistentVolumeClaim) string { return pvc.Namespace + "/" + pvc.Name }

// PreFilter classifies the pod's claims into bound and delayed (WaitForFirstConsumer).
func (pl *VolumeBinding) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	s := &volumeState{decisions: map[string]map[string]string{}}
	hasClaims := false
	for _, vol := range pod.Spec.Volumes {
		var name string
		ephemeral := false
		switch {
		case vol.PersistentVolumeClaim != nil:
			name = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			name, ephemeral = pod.Name+"-"+vol.Name, true
		default:
			continue
		}
		hasClaims = true
		pvc, err := pl.pvcs.PersistentVolumeClaims(pod.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			if ephemeral {
				return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable,
					fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name))
			}
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q not found", name))
		}
		if err != nil {
			return nil, framework.AsStatus(err)
		}
		if ephemeral && !metav1.IsControlledBy(pvc, pod) {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable,
				fmt.Sprintf("persistentvolumeclaim %q was not created for the pod", name))
		}
		if pvc.DeletionTimestamp != nil {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name))
		}
		if pvc.Spec.VolumeName != "" {
			pv, err := pl.pvs.Get(pvc.Spec.VolumeName)
			if err != nil {
				return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "pvc(s) bound to non-existent pv(s)")
			}
			s.boundPVs = append(s.boundPVs, pv)
			continue
		}
		if !pl.isDelayed(pvc) {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnboundImmediatePVC)
		}
		s.delayed = append(s.delayed, pvc)
	}
	if !hasClaims {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(volumeBindingKey, s)
	return nil, nil
}

func (pl *VolumeBinding) class(pvc *v1.PersistentVolumeClaim) *storagev1.StorageClass {
	name := ""
	if pvc.Spec.StorageClassName != nil {
		name = *pvc.Spec.StorageClassName
	}
	if name == "" {
		return nil
	}
	sc, err := pl.classes.Get(name)
	if err != nil {
		return nil
	}
	return sc
}

func (pl *VolumeBinding) isDelayed(pvc *v1.PersistentVolumeClaim) bool {
	sc := pl.class(pvc)
	return sc != nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (*VolumeBinding) PreFilterExtensions() framework.PreFilterExtensions { return nil }

func pvMatchesNode(pv *v1.PersistentVolume, node *v1.Node) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return true
	}
	ns, err := nodeaffinity.NewNodeSelector(pv.Spec.NodeAffinity.Required)
	if err != nil {
		return false
	}
	return ns.Match(node)
}

// Filter implements framework.FilterPlugin.
func (pl *VolumeBinding) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(volumeBindingKey)
	if !ok {
		return framework.AsStatus(errMissingState(VolumeBindingName))
	}
	s := d.(*volumeState)
	node := ni.Node()
	for _, pv := range s.boundPVs {
		if !pvMatchesNode(pv, node) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeConflict)
		}
	}
	if len(s.delayed) == 0 {
		return nil
	}
	decisions, ok := pl.findVolumes(s.delayed, node)
	if !ok {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonBindConflict)
	}
	// Filter runs in parallel over nodes; the decisions map is per node.
	s.mu.Lock()
	s.decisions[node.Name] = decisions
	s.mu.Unlock()
	return nil
}

// findVolumes matches each delayed claim to the smallest fitting available volume on
// the node, or to dynamic provisioning when its class allows the node.
func (pl *VolumeBinding) findVolumes(claims []*v1.PersistentVolumeClaim, node *v1.Node) (map[string]string, bool) {
	pvs, err := pl.pvs.List(labels.Everything())
	if err != nil {
		return nil, false
	}
	sort.Slice(pvs, func(i, j int) bool {
		a, b := pvs[i].Spec.Capacity[v1.ResourceStorage], pvs[j].Spec.Capacity[v1.ResourceStorage]
		return a.Cmp(b) < 0
	})
	used := map[string]bool{}
	out := map[string]string{}
	for _, pvc := range claims {
		found := false
		for _, pv := range pvs {
			if used[pv.Name] || !pvFitsClaim(pv, pvc) || !pvMatchesNode(pv, node) {
				continue
			}
			used[pv.Name] = true
			out[claimKey(pvc)] = pv.Name
			found = true
			break
		}
		if found {
			continue
		}
		sc := pl.class(pvc)
		if sc == nil || sc.Provisioner == noProvisioner || !topologyAllows(sc.AllowedTopologies, node) {
			return nil, false
		}
		out[claimKey(pvc)] = ""
	}
	return out, true
}

func pvFitsClaim(pv *v1.PersistentVolume, pvc *v1.PersistentVolumeClaim) bool {
	if pv.DeletionTimestamp != nil || pv.Status.Phase != "" && pv.Status.Phase != v1.VolumeAvailable {
		return false
	}
	if ref := pv.Spec.ClaimRef; ref != nil && (ref.Namespace != pvc.Namespace || ref.Name != pvc.Name || (ref.UID != "" && ref.UID != pvc.UID)) {
		return false
	}
	className := ""
	if pvc.Spec.StorageClassName != nil {
		className = *pvc.Spec.StorageClassName
	}
	if pv.Spec.StorageClassName != className {
		return false
	}
	want := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	have := pv.Spec.Capacity[v1.ResourceStorage]
	if have.Cmp(want) < 0 {
		return false
	}
	pvMode, pvcMode := v1.PersistentVolumeFilesystem, v1.PersistentVolumeFilesystem
	if pv.Spec.VolumeMode != nil {
		pvMode = *pv.Spec.VolumeMode
	}
	if pvc.Spec.VolumeMode != nil {
		pvcMode = *pvc.Spec.VolumeMode
	}
	if pvMode != pvcMode {
		return false
	}
	for _, m := range pvc.Spec.AccessModes {
		ok := false
		for _, h := range pv.Spec.AccessModes {
			ok = ok || h == m
		}
		if !ok {
			return false
		}
	}
	if pvc.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(pvc.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pv.Labels)) {
			return false
		}
	}
	return true
}

func topologyAllows(terms []v1.TopologySelectorTerm, node *v1.Node) bool {
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		ok := true
		for _, e := range t.MatchLabelExpressions {
			v, has := node.Labels[e.Key]
			in := false
			for _, want := range e.Values {
				in = in || (has && want == v)
			}
			ok = ok && in
		}
		if ok {
			return true
		}
	}
	return false
}

// Reserve fixes the decisions for the chosen node.
func (pl *VolumeBinding) Reserve(_ context.Context, state *framework.CycleState, _ *v1.Pod, nodeName string) *framework.Status {
	d, ok := state.Read(volumeBindingKey)
	if !ok {
		return nil
	}
	s := d.(*volumeState)
	s.mu.Lock()
	s.chosen = s.decisions[nodeName]
	s.mu.Unlock()
	return nil
}

// Unreserve forgets the decisions; nothing was written yet.
func (pl *VolumeBinding) Unreserve(_ context.Context, state *framework.CycleState, _ *v1.Pod, _ string) {
	if d, ok := state.Read(volumeBindingKey); ok {
		d.(*volumeState).mu.Lock()
		d.(*volumeState).chosen = nil
		d.(*volumeState).mu.Unlock()
	}
}

// PreBind claims the chosen volumes (or requests provisioning on the node) and waits
// until every claim of the pod is bound.
func (pl *VolumeBinding) PreBind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	d, ok := state.Read(volumeBindingKey)
	if !ok {
		return nil
	}
	s := d.(*volumeState)
	if len(s.delayed) == 0 {
		return nil
	}
	client := pl.handle.ClientSet()
	for _, pvc := range s.delayed {
		pvName := s.chosen[claimKey(pvc)]
		if pvName != "" {
			pv, err := client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			if err != nil {
				return framework.AsStatus(err)
			}
			pv = pv.DeepCopy()
			pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
			if pv.Annotations == nil {
				pv.Annotations = map[string]string{}
			}
			pv.Annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
			if _, err := client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
				return framework.AsStatus(fmt.Errorf("binding volume %s to claim %s: %w", pvName, claimKey(pvc), err))
			}
			continue
		}
		latest, err := client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return framework.AsStatus(err)
		}
		latest = latest.DeepCopy()
		if latest.Annotations == nil {
			latest.Annotations = map[string]string{}
		}
		latest.Annotations[AnnSelectedNode] = nodeName
		if _, err := client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, latest, metav1.UpdateOptions{}); err != nil {
			return framework.AsStatus(fmt.Errorf("selecting node for claim %s: %w", claimKey(pvc), err))
		}
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, pl.bindTimeout, true, func(ctx context.Context) (bool, error) {
		for _, pvc := range s.delayed {
			latest, err := client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if latest.Spec.VolumeName == "" || latest.Status.Phase != v1.ClaimBound {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return framework.AsStatus(fmt.Errorf("binding volumes: %w", err))
	}
	return nil
}
