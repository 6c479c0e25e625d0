package replicaset

import (
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"mizzen/internal/controller/util"
)

// podDeletionCostAnnotation lets users order which pods of a ReplicaSet go first on a
// scale down: lower cost goes first.
const podDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// podsToDelete picks the n pods that are cheapest to lose, as upstream ranks them:
// unscheduled before scheduled; Pending before Unknown before Running; not ready before
// ready; lower deletion cost first; more pods of the set on the same node first;
// ready for a shorter time first; more restarts first; newer first.
func podsToDelete(pods []*corev1.Pod, n int) []*corev1.Pod {
	if n >= len(pods) {
		return pods
	}
	perNode := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			perNode[p.Spec.NodeName]++
		}
	}
	ranked := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(ranked, func(i, j int) bool {
		return deleteFirst(ranked[i], ranked[j], perNode)
	})
	return ranked[:n]
}

func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 3
}

func deletionCost(p *corev1.Pod) int64 {
	v, err := strconv.ParseInt(p.Annotations[podDeletionCostAnnotation], 10, 32)
	if err != nil {
		return 0
	}
	return v
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// deleteFirst reports whether a should be deleted before b.
func deleteFirst(a, b *corev1.Pod, perNode map[string]int) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if ra, rb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); ra != rb {
		return ra < rb
	}
	if ra, rb := util.IsPodReady(a), util.IsPodReady(b); ra != rb {
		return !ra
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if na, nb := perNode[a.Spec.NodeName], perNode[b.Spec.NodeName]; na != nb {
		return na > nb
	}
	if util.IsPodReady(a) && util.IsPodReady(b) {
		ta, tb := util.PodReadyCondition(a).LastTransitionTime, util.PodReadyCondition(b).LastTransitionTime
		if !ta.Equal(&tb) {
			return tb.Before(&ta)
		}
	}
	if ra, rb := restarts(a), restarts(b); ra != rb {
		return ra > rb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name < b.Name
}
