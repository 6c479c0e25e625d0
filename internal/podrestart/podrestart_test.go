package podrestart

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestContainerRestarts(t *testing.T) {
	never, always, onFailure := corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure
	on := func(action corev1.ContainerRestartRuleAction, op corev1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) corev1.ContainerRestartRule {
		return corev1.ContainerRestartRule{Action: action, ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
	}
	restart, all := corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleActionRestartAllContainers
	in, notIn := corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn
	for _, tc := range []struct {
		name        string
		container   corev1.Container
		pod         corev1.RestartPolicy
		exit        int32
		restarts    bool
		restartsAll bool
	}{
		{"pod Always", corev1.Container{}, corev1.RestartPolicyAlways, 0, true, false},
		{"pod policy unset", corev1.Container{}, "", 0, true, false},
		{"pod OnFailure, success", corev1.Container{}, corev1.RestartPolicyOnFailure, 0, false, false},
		{"pod OnFailure, failure", corev1.Container{}, corev1.RestartPolicyOnFailure, 1, true, false},
		{"pod Never", corev1.Container{}, corev1.RestartPolicyNever, 1, false, false},
		{"container Never over pod Always", corev1.Container{RestartPolicy: &never}, corev1.RestartPolicyAlways, 1, false, false},
		{"container Always over pod Never", corev1.Container{RestartPolicy: &always}, corev1.RestartPolicyNever, 0, true, false},
		{"container OnFailure over pod Never", corev1.Container{RestartPolicy: &onFailure}, corev1.RestartPolicyNever, 2, true, false},
		{"rule In matches", corev1.Container{RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{on(restart, in, 42)}}, corev1.RestartPolicyNever, 42, true, false},
		{"rule In does not match: the container's policy", corev1.Container{RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{on(restart, in, 42)}}, corev1.RestartPolicyAlways, 1, false, false},
		{"rule NotIn matches", corev1.Container{RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{on(restart, notIn, 0)}}, corev1.RestartPolicyNever, 7, true, false},
		{"first matching rule wins", corev1.Container{RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{on(all, in, 3), on(restart, in, 3)}}, corev1.RestartPolicyNever, 3, true, true},
		{"RestartAllContainers", corev1.Container{RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{on(all, in, 9)}}, corev1.RestartPolicyNever, 9, true, true},
		{"rules ignored without a container policy", corev1.Container{RestartPolicyRules: []corev1.ContainerRestartRule{on(all, in, 9)}}, corev1.RestartPolicyNever, 9, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ContainerRestarts(&tc.container, tc.pod, tc.exit); got != tc.restarts {
				t.Errorf("ContainerRestarts = %v, want %v", got, tc.restarts)
			}
			if got := RestartsAll(&tc.container, tc.exit); got != tc.restartsAll {
				t.Errorf("RestartsAll = %v, want %v", got, tc.restartsAll)
			}
		})
	}
}
