package util

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// IsPodReady reports whether the pod's Ready condition is True.
func IsPodReady(pod *corev1.Pod) bool {
	c := PodReadyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// PodReadyCondition returns the pod's Ready condition, or nil.
func PodReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// IsPodAvailable reports whether the pod has been ready for at least minReadySeconds
// at now.
func IsPodAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := PodReadyCondition(pod)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	min := time.Duration(minReadySeconds) * time.Second
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(min).Before(now)
}

// AvailableAfter returns how long until a ready pod becomes available, or 0 when it
// already is or is not ready at all (used to requeue at the right moment).
func AvailableAfter(pod *corev1.Pod, minReadySeconds int32, now time.Time) time.Duration {
	c := PodReadyCondition(pod)
	if minReadySeconds == 0 || c == nil || c.Status != corev1.ConditionTrue {
		return 0
	}
	d := c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second + time.Second).Sub(now)
	if d < 0 {
		return 0
	}
	return d
}

// IsPodActive reports whether the pod counts toward a controller's replicas: not
// finished and not being deleted.
func IsPodActive(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded &&
		pod.Status.Phase != corev1.PodFailed &&
		pod.DeletionTimestamp == nil
}

// IsPodTerminal reports whether the pod's phase is Succeeded or Failed.
func IsPodTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// FilterActivePods returns the pods that are IsPodActive.
func FilterActivePods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if IsPodActive(p) {
			out = append(out, p)
		}
	}
	return out
}
