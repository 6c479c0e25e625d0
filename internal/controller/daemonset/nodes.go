package daemonset

import (
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// daemonTolerations are added to every DaemonSet pod, as upstream does, so that daemons
// keep running on nodes that are unhealthy or cordoned.
func daemonTolerations(spec *corev1.PodSpec) []corev1.Toleration {
	t := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if spec.HostNetwork {
		t = append(t, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return t
}

// withDaemonTolerations returns spec's tolerations plus the automatic ones it lacks.
func withDaemonTolerations(spec *corev1.PodSpec) []corev1.Toleration {
	out := append([]corev1.Toleration(nil), spec.Tolerations...)
	for _, add := range daemonTolerations(spec) {
		present := false
		for i := range out {
			if out[i].MatchToleration(&add) {
				present = true
				break
			}
		}
		if !present {
			out = append(out, add)
		}
	}
	return out
}

// placement says whether a daemon pod should be started on node, and whether one
// already there may keep running (a NoSchedule taint stops new pods only).
func placement(node *corev1.Node, ds *appsv1.DaemonSet) (shouldRun, shouldContinue bool) {
	pod := &corev1.Pod{Spec: *ds.Spec.Template.Spec.DeepCopy()}
	pod.Spec.Tolerations = withDaemonTolerations(&pod.Spec)
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return false, false
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false, false
	}
	shouldRun, shouldContinue = true, true
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect == corev1.TaintEffectPreferNoSchedule || tolerated(pod.Spec.Tolerations, taint) {
			continue
		}
		shouldRun = false
		if taint.Effect == corev1.TaintEffectNoExecute {
			shouldContinue = false
		}
	}
	return shouldRun, shouldContinue
}

func tolerated(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logr.Discard(), taint, true) {
			return true
		}
	}
	return false
}

// pinToNode makes the scheduler place the pod on nodeName: the required node affinity
// becomes a single term matching the field metadata.name, as upstream does (the
// controller has already checked the DaemonSet's own affinity against the node).
func pinToNode(affinity *corev1.Affinity, nodeName string) *corev1.Affinity {
	if affinity == nil {
		affinity = &corev1.Affinity{}
	}
	if affinity.NodeAffinity == nil {
		affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}}}},
	}
	return affinity
}

// targetNode is the node a daemon pod runs on or is pinned to.
func targetNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}
