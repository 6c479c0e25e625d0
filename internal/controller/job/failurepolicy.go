package job

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// matchFailurePolicy returns the action of the first podFailurePolicy rule that matches
// a failed pod, with a message for FailJob, or nil when no rule matches (Count).
func matchFailurePolicy(policy *batchv1.PodFailurePolicy, pod *corev1.Pod) (*batchv1.PodFailurePolicyAction, string) {
	if policy == nil {
		return nil, ""
	}
	for i, rule := range policy.Rules {
		if rule.OnExitCodes != nil {
			if name, code, ok := matchExitCodes(rule.OnExitCodes, pod); ok {
				action := rule.Action
				return &action, fmt.Sprintf("Container %s for pod %s/%s failed with exit code %d matching %s rule at index %d",
					name, pod.Namespace, pod.Name, code, action, i)
			}
		}
		for _, pattern := range rule.OnPodConditions {
			for _, c := range pod.Status.Conditions {
				if c.Type == pattern.Type && c.Status == pattern.Status {
					action := rule.Action
					return &action, fmt.Sprintf("Pod %s/%s has condition %s matching %s rule at index %d",
						pod.Namespace, pod.Name, c.Type, action, i)
				}
			}
		}
	}
	return nil, ""
}

func matchExitCodes(req *batchv1.PodFailurePolicyOnExitCodesRequirement, pod *corev1.Pod) (string, int32, bool) {
	statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if req.ContainerName != nil && *req.ContainerName != cs.Name {
			continue
		}
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		in := slices.Contains(req.Values, t.ExitCode)
		if (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) == in {
			return cs.Name, t.ExitCode, true
		}
	}
	return "", 0, false
}
