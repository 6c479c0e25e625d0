package util

import corev1 "k8s.io/api/core/v1"

// PodIsReady reports whether the pod's Ready condition is True.
func PodIsReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodIsTerminal reports whether the pod has finished for good (Succeeded or Failed).
func PodIsTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
