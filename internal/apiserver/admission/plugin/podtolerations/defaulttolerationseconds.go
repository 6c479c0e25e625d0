// Package podtolerations is upstream's DefaultTolerationSeconds plugin: a pod created or
// updated without tolerating the not-ready and unreachable NoExecute taints gets
// tolerations for them of 300 seconds, so its node's failure evicts it after five
// minutes. On update too, as upstream's: an update that replaces the tolerations keeps
// the defaults, which the pod's validation forbids removing.
package podtolerations

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name.
const PluginName = "DefaultTolerationSeconds"

// DefaultSeconds is upstream's default for both tolerations.
const DefaultSeconds int64 = 300

// Plugin is DefaultTolerationSeconds.
type Plugin struct{ admission.Ops }

// New returns the plugin.
func New() *Plugin { return &Plugin{Ops: admission.Ops{admission.Create, admission.Update}} }

var _ admission.Mutator = (*Plugin)(nil)

// Admit adds the default tolerations a pod lacks.
func (p *Plugin) Admit(_ context.Context, a *admission.Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || a.Resource.GroupResource().String() != "pods" || a.Subresource != "" {
		return nil
	}
	notReady, unreachable := false, false
	for _, t := range pod.Spec.Tolerations {
		noExecute := t.Effect == corev1.TaintEffectNoExecute || t.Effect == ""
		if (t.Key == corev1.TaintNodeNotReady || t.Key == "") && noExecute {
			notReady = true
		}
		if (t.Key == corev1.TaintNodeUnreachable || t.Key == "") && noExecute {
			unreachable = true
		}
	}
	for _, add := range []struct {
		key  string
		have bool
	}{{corev1.TaintNodeNotReady, notReady}, {corev1.TaintNodeUnreachable, unreachable}} {
		if add.have {
			continue
		}
		secs := DefaultSeconds
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
			Key: add.key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs,
		})
	}
	return nil
}
