// Package quota is how resource quota measures pods, shared by the resourcequota
// controller (which recomputes status.used) and the ResourceQuota admission plugin
// (which charges each new pod against it).
package quota

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"mizzen/internal/controller/util"
	"mizzen/internal/podfit"
)

// PodCounts reports whether quota tracks the pod at all: it has not finished and is
// not past the end of its grace period.
func PodCounts(pod *corev1.Pod, now time.Time) bool {
	if util.IsPodTerminal(pod) {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		end := pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
		if now.After(end) {
			return false
		}
	}
	return true
}

// ComputeResource maps a quota resource name onto the pod field it limits:
// "requests.cpu" and bare "cpu" (and "hugepages-<size>") are requests, "limits.cpu"
// limits. ok is false for names that are not compute resources (counts, storage).
func ComputeResource(name corev1.ResourceName) (res corev1.ResourceName, limits bool, ok bool) {
	s := string(name)
	switch {
	case strings.HasPrefix(s, "requests."):
		r := corev1.ResourceName(strings.TrimPrefix(s, "requests."))
		return r, false, r != corev1.ResourceStorage
	case strings.HasPrefix(s, "limits."):
		return corev1.ResourceName(strings.TrimPrefix(s, "limits.")), true, true
	case name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage,
		strings.HasPrefix(s, corev1.ResourceHugePagesPrefix):
		return name, false, true
	}
	return "", false, false
}

// PodOtherRequests is what a pod counts for against a quota beyond cpu, memory and
// ephemeral storage, by quota resource name, as upstream's pod evaluator charges it:
// each hugepages-<size> it requests as itself and as requests.hugepages-<size>, and
// each extended resource as requests.<name> (a quota limits those only by their
// requests).
func PodOtherRequests(pod *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	add := func(requests corev1.ResourceList) {
		for r := range requests {
			hugePages := strings.HasPrefix(string(r), corev1.ResourceHugePagesPrefix)
			if !hugePages && !podfit.IsExtendedResourceName(r) {
				continue
			}
			requested := corev1.ResourceName("requests." + string(r))
			if _, done := out[requested]; done {
				continue
			}
			amount := PodAmount(pod, r, false)
			out[requested] = amount
			if hugePages {
				out[r] = amount
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		add(pod.Spec.InitContainers[i].Resources.Requests)
	}
	for i := range pod.Spec.Containers {
		add(pod.Spec.Containers[i].Resources.Requests)
	}
	add(pod.Spec.Overhead)
	return out
}

// PodAmount is what the pod asks for of one resource, as the scheduler sees it: the
// larger of its long-running containers (with sidecars) and its heaviest init step,
// plus the pod overhead.
func PodAmount(pod *corev1.Pod, res corev1.ResourceName, limits bool) resource.Quantity {
	pick := func(r corev1.ResourceRequirements) resource.Quantity {
		list := r.Requests
		if limits {
			list = r.Limits
		}
		return list[res]
	}
	total := resource.Quantity{}
	for _, c := range pod.Spec.Containers {
		total.Add(pick(c.Resources))
	}
	sidecars := resource.Quantity{}
	peakInit := resource.Quantity{}
	for _, c := range pod.Spec.InitContainers {
		q := pick(c.Resources)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(q)
			if sidecars.Cmp(peakInit) > 0 {
				peakInit = sidecars.DeepCopy()
			}
			continue
		}
		step := sidecars.DeepCopy()
		step.Add(q)
		if step.Cmp(peakInit) > 0 {
			peakInit = step
		}
	}
	total.Add(sidecars)
	if peakInit.Cmp(total) > 0 {
		total = peakInit
	}
	if q, ok := pod.Spec.Overhead[res]; ok {
		total.Add(q)
	}
	return total
}

// BestEffort: no container asks for or is limited in cpu or memory.
func BestEffort(pod *corev1.Pod) bool {
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			if _, ok := list[corev1.ResourceCPU]; ok {
				return false
			}
			if _, ok := list[corev1.ResourceMemory]; ok {
				return false
			}
		}
	}
	return true
}

// IsTerminating: the pod has an active deadline, so it falls under the Terminating
// scope rather than NotTerminating.
func IsTerminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// PodInScope applies a quota's scopes to a pod.
func PodInScope(pod *corev1.Pod, q *corev1.ResourceQuota) bool {
	terminating := IsTerminating(pod)
	check := func(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values []string) bool {
		switch scope {
		case corev1.ResourceQuotaScopeTerminating:
			return terminating
		case corev1.ResourceQuotaScopeNotTerminating:
			return !terminating
		case corev1.ResourceQuotaScopeBestEffort:
			return BestEffort(pod)
		case corev1.ResourceQuotaScopeNotBestEffort:
			return !BestEffort(pod)
		case corev1.ResourceQuotaScopePriorityClass:
			pc := pod.Spec.PriorityClassName
			switch op {
			case corev1.ScopeSelectorOpIn:
				return slices.Contains(values, pc)
			case corev1.ScopeSelectorOpNotIn:
				return !slices.Contains(values, pc)
			case corev1.ScopeSelectorOpExists:
				return pc != ""
			case corev1.ScopeSelectorOpDoesNotExist:
				return pc == ""
			}
			return false
		case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
			return UsesCrossNamespacePodAffinity(pod)
		}
		return true // scopes about other objects do not restrict pods
	}
	for _, s := range q.Spec.Scopes {
		if !check(s, corev1.ScopeSelectorOpExists, nil) {
			return false
		}
	}
	if q.Spec.ScopeSelector != nil {
		for _, e := range q.Spec.ScopeSelector.MatchExpressions {
			match := check(e.ScopeName, e.Operator, e.Values)
			if e.ScopeName != corev1.ResourceQuotaScopePriorityClass && e.Operator == corev1.ScopeSelectorOpDoesNotExist {
				match = !match
			}
			if !match {
				return false
			}
		}
	}
	return true
}

// UsesCrossNamespacePodAffinity: one of the pod's affinity or anti-affinity terms names
// other namespaces, by list or by selector (the CrossNamespacePodAffinity scope).
func UsesCrossNamespacePodAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}
