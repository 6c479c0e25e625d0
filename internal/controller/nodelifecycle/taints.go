package nodelifecycle

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// tolerates reports whether a toleration matches a taint (key, value by operator, effect).
func tolerates(tol corev1.Toleration, taint corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != taint.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return tol.Key != "" && tol.Value == taint.Value
	}
	return false
}

// evictionTime is when the pod must leave a node with these NoExecute taints: now if
// some taint is not tolerated, else the earliest taint time plus tolerationSeconds of
// the toleration that covers it; ok is false when every taint is tolerated forever.
func evictionTime(pod *corev1.Pod, taints []corev1.Taint, now time.Time) (at time.Time, ok bool) {
	for _, taint := range taints {
		if taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		var covering *corev1.Toleration
		for i := range pod.Spec.Tolerations {
			if tolerates(pod.Spec.Tolerations[i], taint) {
				covering = &pod.Spec.Tolerations[i]
				break
			}
		}
		if covering == nil {
			return now, true
		}
		if covering.TolerationSeconds == nil {
			continue
		}
		added := now
		if taint.TimeAdded != nil {
			added = taint.TimeAdded.Time
		}
		seconds := max(*covering.TolerationSeconds, 0)
		t := added.Add(time.Duration(seconds) * time.Second)
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	return at, ok
}

// hasNoExecuteTaint reports whether the node carries this controller's unreachable or
// not-ready NoExecute taint.
func hasNoExecuteTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady) {
			return true
		}
	}
	return false
}

// wantTaints returns the node's taints with the unreachable/not-ready pair set to
// match its Ready condition, and whether anything changed. Without noExecute only the
// NoSchedule half is wanted (and a NoExecute one present is removed).
func wantTaints(node *corev1.Node, ready corev1.ConditionStatus, now time.Time, noExecute bool) ([]corev1.Taint, bool) {
	var key string
	switch ready {
	case corev1.ConditionUnknown:
		key = corev1.TaintNodeUnreachable
	case corev1.ConditionFalse:
		key = corev1.TaintNodeNotReady
	}
	var out []corev1.Taint
	changed := false
	have := map[corev1.TaintEffect]bool{}
	for _, t := range node.Spec.Taints {
		ours := t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady
		unwanted := t.Key != key || (t.Effect == corev1.TaintEffectNoExecute && !noExecute)
		if ours && unwanted && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == corev1.TaintEffectNoSchedule) {
			changed = true
			continue
		}
		if ours && t.Key == key {
			have[t.Effect] = true
		}
		out = append(out, t)
	}
	if key != "" {
		for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
			if have[effect] || (effect == corev1.TaintEffectNoExecute && !noExecute) {
				continue
			}
			t := corev1.Taint{Key: key, Effect: effect}
			if effect == corev1.TaintEffectNoExecute {
				added := metav1Time(now)
				t.TimeAdded = &added
			}
			out = append(out, t)
			changed = true
		}
	}
	return out, changed
}

// conditionTaintKeys are the NoSchedule taints a node's conditions call for, as
// upstream's TaintNodesByCondition: the scheduler keeps new pods off a node under
// pressure (or without its network) unless they tolerate it, where otherwise the
// kubelet would take them and refuse them. The Ready condition's pair is wantTaints'.
var conditionTaintKeys = map[corev1.NodeConditionType]string{
	corev1.NodeMemoryPressure:     corev1.TaintNodeMemoryPressure,
	corev1.NodeDiskPressure:       corev1.TaintNodeDiskPressure,
	corev1.NodePIDPressure:        corev1.TaintNodePIDPressure,
	corev1.NodeNetworkUnavailable: corev1.TaintNodeNetworkUnavailable,
}

// isConditionTaint reports whether t is one of the NoSchedule taints
// wantConditionTaints manages.
func isConditionTaint(t corev1.Taint) bool {
	if t.Effect != corev1.TaintEffectNoSchedule {
		return false
	}
	if t.Key == corev1.TaintNodeUnschedulable {
		return true
	}
	for _, key := range conditionTaintKeys {
		if t.Key == key {
			return true
		}
	}
	return false
}

// wantConditionTaints returns taints with the NoSchedule taints of the node's
// pressure and network conditions (True) and of spec.unschedulable (a cordoned node)
// set to match them, and whether anything changed. A taint added carries the time it
// was added, as upstream's controller sets it.
func wantConditionTaints(node *corev1.Node, taints []corev1.Taint, now time.Time) ([]corev1.Taint, bool) {
	want := map[string]bool{}
	for _, c := range node.Status.Conditions {
		if key, ok := conditionTaintKeys[c.Type]; ok && c.Status == corev1.ConditionTrue {
			want[key] = true
		}
	}
	if node.Spec.Unschedulable {
		want[corev1.TaintNodeUnschedulable] = true
	}
	var out []corev1.Taint
	changed := false
	for _, t := range taints {
		if isConditionTaint(t) {
			if !want[t.Key] {
				changed = true
				continue
			}
			delete(want, t.Key) // present already
		}
		out = append(out, t)
	}
	keys := make([]string, 0, len(want))
	for key := range want {
		keys = append(keys, key)
	}
	slices.Sort(keys) // a stable order: the same conditions, the same node
	for _, key := range keys {
		added := metav1Time(now)
		out = append(out, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added})
		changed = true
	}
	return out, changed
}
