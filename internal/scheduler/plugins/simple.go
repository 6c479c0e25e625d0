package plugins

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/scheduler/framework"
)

// PrioritySort orders the queue by priority then age; the queue implements the ordering,
// and the plugin exists so configurations naming it stay valid.
type PrioritySort struct{}

// Name implements framework.Plugin.
func (*PrioritySort) Name() string { return PrioritySortName }

// SchedulingGates keeps gated pods out of scheduling; the queue parks pods with
// spec.schedulingGates until an update removes them, so this plugin only names the rule.
type SchedulingGates struct{}

// Name implements framework.Plugin.
func (*SchedulingGates) Name() string { return SchedulingGatesName }

// DefaultBinder binds through the pods/binding subresource.
type DefaultBinder struct {
	handle framework.Handle
}

var _ framework.BindPlugin = (*DefaultBinder)(nil)

// Name implements framework.Plugin.
func (*DefaultBinder) Name() string { return DefaultBinderName }

// Bind posts a Binding for the pod.
func (b *DefaultBinder) Bind(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if err := b.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return framework.AsStatus(fmt.Errorf("binding rejected: %w", err))
	}
	return nil
}
