package framework

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"mizzen/internal/podfit"
)

// Defaults used for scoring containers that request nothing, as upstream: a pod without
// requests still occupies something, so spreading does not pile them onto one node.
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// Resource is a compact, comparable view of a resource list.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	AllowedPodNumber int
	// ScalarResources holds extended resources, hugepages and attachable volumes.
	ScalarResources map[v1.ResourceName]int64
}

// NewResource converts a resource list.
func NewResource(rl v1.ResourceList) Resource {
	var r Resource
	r.Add(rl)
	return r
}

// Add accumulates a resource list.
func (r *Resource) Add(rl v1.ResourceList) {
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case v1.ResourceMemory:
			r.Memory += q.Value()
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case v1.ResourcePods:
			r.AllowedPodNumber += int(q.Value())
		default:
			if IsScalarResourceName(name) {
				if r.ScalarResources == nil {
					r.ScalarResources = map[v1.ResourceName]int64{}
				}
				r.ScalarResources[name] += q.Value()
			}
		}
	}
}

// AddResource adds (sign=1) or subtracts (sign=-1) another Resource.
func (r *Resource) AddResource(o *Resource, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	for name, v := range o.ScalarResources {
		if r.ScalarResources == nil {
			r.ScalarResources = map[v1.ResourceName]int64{}
		}
		r.ScalarResources[name] += sign * v
	}
}

// Get returns the amount of one resource.
func (r *Resource) Get(name v1.ResourceName) int64 {
	switch name {
	case v1.ResourceCPU:
		return r.MilliCPU
	case v1.ResourceMemory:
		return r.Memory
	case v1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	case v1.ResourcePods:
		return int64(r.AllowedPodNumber)
	default:
		return r.ScalarResources[name]
	}
}

// Clone deep-copies the resource.
func (r Resource) Clone() Resource {
	out := r
	if r.ScalarResources != nil {
		out.ScalarResources = make(map[v1.ResourceName]int64, len(r.ScalarResources))
		for k, v := range r.ScalarResources {
			out.ScalarResources[k] = v
		}
	}
	return out
}

// IsScalarResourceName reports extended resources (domain-prefixed, not kubernetes.io),
// hugepages and attachable volumes, the resources tracked as plain integers.
func IsScalarResourceName(name v1.ResourceName) bool {
	s := string(name)
	if strings.HasPrefix(s, v1.ResourceHugePagesPrefix) || strings.HasPrefix(s, v1.ResourceAttachableVolumesPrefix) {
		return true
	}
	return podfit.IsExtendedResourceName(name)
}

// AffinityTerm is a parsed pod (anti-)affinity term.
type AffinityTerm struct {
	Namespaces        sets.Set[string]
	Selector          labels.Selector
	TopologyKey       string
	NamespaceSelector labels.Selector
}

// Matches reports whether pod (living in a namespace with nsLabels) is selected by the term.
func (t *AffinityTerm) Matches(pod *v1.Pod, nsLabels labels.Set) bool {
	if t.Namespaces.Has(pod.Namespace) || (t.NamespaceSelector != nil && t.NamespaceSelector.Matches(nsLabels)) {
		return t.Selector.Matches(labels.Set(pod.Labels))
	}
	return false
}

// WeightedAffinityTerm is a preferred term with its weight.
type WeightedAffinityTerm struct {
	AffinityTerm
	Weight int32
}

// PodInfo is a pod with the derived data plugins need, computed once.
type PodInfo struct {
	Pod                        *v1.Pod
	RequiredAffinityTerms      []AffinityTerm
	RequiredAntiAffinityTerms  []AffinityTerm
	PreferredAffinityTerms     []WeightedAffinityTerm
	PreferredAntiAffinityTerms []WeightedAffinityTerm
	// Requests are the effective requests (init containers, sidecars, overhead).
	Requests Resource
	// NonZeroRequests substitutes defaults for missing cpu/memory requests (for scoring).
	NonZeroRequests Resource
	// ParseError is set when an affinity term has an invalid selector.
	ParseError error
	// Priority is the pod's priority (PodPriority), kept here because preemption's
	// dry runs read it for every pod of every node they try: from the PodInfo it costs
	// no visit to the pod's spec.
	Priority int32
	// UID is PodUID(Pod), which every removal from a node compares pod by pod.
	UID types.UID
	// hostPorts and pvcs say whether the pod has a container host port and a
	// persistent volume claim, which NodeInfo counts (they are immutable in a pod's spec).
	hostPorts, pvcs bool
}

// NewPodInfo computes a PodInfo.
func NewPodInfo(pod *v1.Pod) *PodInfo {
	pi := &PodInfo{}
	pi.Update(pod)
	return pi
}

// Update recomputes the derived data for a new version of the pod.
func (pi *PodInfo) Update(pod *v1.Pod) {
	if pi.Pod != nil && pi.Pod.UID == pod.UID && pi.Pod.ResourceVersion == pod.ResourceVersion && pod.ResourceVersion != "" {
		pi.Pod = pod
		return
	}
	*pi = PodInfo{Pod: pod, Priority: PodPriority(pod), UID: PodUID(pod)}
	for i := range pod.Spec.Containers {
		for _, port := range pod.Spec.Containers[i].Ports {
			pi.hostPorts = pi.hostPorts || port.HostPort > 0
		}
	}
	for _, vol := range pod.Spec.Volumes {
		pi.pvcs = pi.pvcs || vol.PersistentVolumeClaim != nil
	}
	pi.Requests = NewResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	pi.NonZeroRequests = NewResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		NonMissingContainerRequests: v1.ResourceList{
			v1.ResourceCPU:    *resourceQuantityMilli(DefaultMilliCPURequest),
			v1.ResourceMemory: *resourceQuantity(DefaultMemoryRequest),
		},
	}))
	if a := pod.Spec.Affinity; a != nil {
		var err error
		if a.PodAffinity != nil {
			pi.RequiredAffinityTerms, err = newAffinityTerms(pod, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
			pi.setErr(err)
			pi.PreferredAffinityTerms, err = newWeightedAffinityTerms(pod, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
			pi.setErr(err)
		}
		if a.PodAntiAffinity != nil {
			pi.RequiredAntiAffinityTerms, err = newAffinityTerms(pod, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
			pi.setErr(err)
			pi.PreferredAntiAffinityTerms, err = newWeightedAffinityTerms(pod, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
			pi.setErr(err)
		}
	}
}

func (pi *PodInfo) setErr(err error) {
	if err != nil && pi.ParseError == nil {
		pi.ParseError = err
	}
}

// HasAffinity reports whether the pod has any inter-pod (anti-)affinity.
func (pi *PodInfo) HasAffinity() bool {
	return len(pi.RequiredAffinityTerms)+len(pi.RequiredAntiAffinityTerms)+len(pi.PreferredAffinityTerms)+len(pi.PreferredAntiAffinityTerms) > 0
}

// NewAffinityTerm parses one term of pod.
func NewAffinityTerm(pod *v1.Pod, term *v1.PodAffinityTerm) (*AffinityTerm, error) {
	selector, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return nil, err
	}
	// matchLabelKeys / mismatchLabelKeys fold the incoming pod's own label values in.
	for _, key := range term.MatchLabelKeys {
		if v, ok := pod.Labels[key]; ok {
			r, err := labels.NewRequirement(key, "=", []string{v})
			if err == nil {
				selector = selector.Add(*r)
			}
		}
	}
	for _, key := range term.MismatchLabelKeys {
		if v, ok := pod.Labels[key]; ok {
			r, err := labels.NewRequirement(key, "!=", []string{v})
			if err == nil {
				selector = selector.Add(*r)
			}
		}
	}
	namespaces := sets.New(term.Namespaces...)
	var nsSelector labels.Selector
	if term.NamespaceSelector != nil {
		nsSelector, err = metav1.LabelSelectorAsSelector(term.NamespaceSelector)
		if err != nil {
			return nil, err
		}
	}
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil {
		namespaces.Insert(pod.Namespace)
	}
	return &AffinityTerm{Namespaces: namespaces, Selector: selector, TopologyKey: term.TopologyKey, NamespaceSelector: nsSelector}, nil
}

func newAffinityTerms(pod *v1.Pod, terms []v1.PodAffinityTerm) ([]AffinityTerm, error) {
	out := make([]AffinityTerm, 0, len(terms))
	for i := range terms {
		t, err := NewAffinityTerm(pod, &terms[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *t)
	}
	return out, nil
}

func newWeightedAffinityTerms(pod *v1.Pod, terms []v1.WeightedPodAffinityTerm) ([]WeightedAffinityTerm, error) {
	out := make([]WeightedAffinityTerm, 0, len(terms))
	for i := range terms {
		t, err := NewAffinityTerm(pod, &terms[i].PodAffinityTerm)
		if err != nil {
			return nil, err
		}
		out = append(out, WeightedAffinityTerm{AffinityTerm: *t, Weight: terms[i].Weight})
	}
	return out, nil
}

// PodPriority returns the pod's priority (0 when unset).
func PodPriority(pod *v1.Pod) int32 { return corev1helpers.PodPriority(pod) }

// QueuedPodInfo is a pod waiting in the scheduling queue.
type QueuedPodInfo struct {
	*PodInfo
	// Timestamp is when the pod was last added to the queue.
	Timestamp time.Time
	// InitialAttemptTimestamp is when the pod was first popped, for e2e latency.
	InitialAttemptTimestamp *time.Time
	// Attempts counts scheduling attempts, driving back-off.
	Attempts int
	// UnschedulablePlugins are the plugins that rejected the pod in its last attempt;
	// only events registered by them move the pod out of the unschedulable pool.
	UnschedulablePlugins sets.Set[string]
	// Gated is true when the pod has scheduling gates.
	Gated bool
}

// Key returns namespace/name.
func (q *QueuedPodInfo) Key() string { return PodKey(q.Pod) }

// PodKey returns namespace/name of a pod.
func PodKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// PodUID returns the pod's UID, falling back to its key for objects without one (tests).
func PodUID(pod *v1.Pod) types.UID {
	if pod.UID != "" {
		return pod.UID
	}
	return types.UID(PodKey(pod))
}

// FitError describes why a pod fits no node, in the form upstream prints.
type FitError struct {
	Pod           *v1.Pod
	NumAllNodes   int
	Diagnosis     Diagnosis
	PostFilterMsg string
}

// Diagnosis records per-node rejections of one scheduling attempt.
type Diagnosis struct {
	NodeToStatus         map[string]*Status
	UnschedulablePlugins sets.Set[string]
	PreFilterMsg         string
}

// Error renders e.g. "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) were unschedulable."
func (f *FitError) Error() string {
	msg := fmt.Sprintf("0/%d nodes are available:", f.NumAllNodes)
	if f.Diagnosis.PreFilterMsg != "" {
		msg += " " + f.Diagnosis.PreFilterMsg + "."
	} else if hist := ReasonHistogram(f.Diagnosis.NodeToStatus); hist != "" {
		msg += " " + hist + "."
	}
	if f.PostFilterMsg != "" {
		msg += " " + f.PostFilterMsg + "."
	}
	return msg
}
