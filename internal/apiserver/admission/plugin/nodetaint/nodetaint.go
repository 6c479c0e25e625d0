// Package nodetaint is upstream's TaintNodesByCondition plugin: a new node starts with
// the node.kubernetes.io/not-ready:NoSchedule taint, so nothing is scheduled to it
// before its kubelet reports Ready and the node lifecycle controller lifts the taint.
package nodetaint

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name.
const PluginName = "TaintNodesByCondition"

// Plugin is TaintNodesByCondition.
type Plugin struct{ admission.Ops }

// New returns the plugin.
func New() *Plugin { return &Plugin{Ops: admission.Ops{admission.Create}} }

var _ admission.Mutator = (*Plugin)(nil)

// Admit taints a new node not-ready.
func (p *Plugin) Admit(_ context.Context, a *admission.Attributes) error {
	node, ok := a.Object.(*corev1.Node)
	if !ok || a.Resource.GroupResource().String() != "nodes" || a.Subresource != "" {
		return nil
	}
	taint := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	for _, t := range node.Spec.Taints {
		if t.MatchTaint(&taint) {
			return nil
		}
	}
	node.Spec.Taints = append(node.Spec.Taints, taint)
	return nil
}
