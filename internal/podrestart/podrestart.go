// Package podrestart decides, as upstream does, whether a container that exited is
// started again: by its restart rules, its own restart policy or its pod's. The
// apiserver uses it to refuse a status that takes a container out of the terminated
// state for good, and the kubelet to never send one.
package podrestart

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// MayLeaveTerminated reports whether the container named name, which exited with
// exitCode, may be reported again as waiting or running. specContainers is the list
// of spec that names it (spec.Containers or spec.InitContainers); nil for an ephemeral
// container, which is never restarted. A pod where some container's rule restarts
// every container may restart any of them.
func MayLeaveTerminated(spec *corev1.PodSpec, specContainers []corev1.Container, name string, exitCode int32) bool {
	if specContainers == nil {
		return false
	}
	if anyRestartsAll(spec) {
		return true
	}
	for i := range specContainers {
		if specContainers[i].Name == name {
			return ContainerRestarts(&specContainers[i], spec.RestartPolicy, exitCode)
		}
	}
	return false
}

// ContainerRestarts reports whether a container that exited with exitCode is
// restarted: its first restart rule matching the code (Restart or RestartAllContainers
// does; another action falls through), else its own restart policy, else the pod's
// (Always when unset).
func ContainerRestarts(c *corev1.Container, podPolicy corev1.RestartPolicy, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule := matchingRule(c, exitCode); rule != nil &&
			(rule.Action == corev1.ContainerRestartRuleActionRestart || rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers) {
			return true
		}
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways:
			return true
		case corev1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case corev1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch podPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// RestartsAll reports whether the restart rule of c that matches exitCode, if any,
// asks for every container of the pod to be restarted (RestartAllContainers).
func RestartsAll(c *corev1.Container, exitCode int32) bool {
	rule := matchingRule(c, exitCode)
	return rule != nil && rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers
}

// matchingRule is c's first restart rule whose exit codes match exitCode, or nil; rules
// count only on a container with a restart policy of its own.
func matchingRule(c *corev1.Container, exitCode int32) *corev1.ContainerRestartRule {
	if c.RestartPolicy == nil {
		return nil
	}
	for i := range c.RestartPolicyRules {
		if rule := &c.RestartPolicyRules[i]; rule.ExitCodes != nil && exitCodesMatch(rule.ExitCodes, exitCode) {
			return rule
		}
	}
	return nil
}

// exitCodesMatch reports whether a rule's exit-code requirement holds for code.
func exitCodesMatch(req *corev1.ContainerRestartRuleOnExitCodes, code int32) bool {
	in := slices.Contains(req.Values, code)
	switch req.Operator {
	case corev1.ContainerRestartRuleOnExitCodesOpIn:
		return in
	case corev1.ContainerRestartRuleOnExitCodesOpNotIn:
		return !in
	}
	return false
}

// anyRestartsAll reports whether a container or init container of spec has a rule
// that restarts every container of the pod.
func anyRestartsAll(spec *corev1.PodSpec) bool {
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			for _, rule := range list[i].RestartPolicyRules {
				if rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
					return true
				}
			}
		}
	}
	return false
}
