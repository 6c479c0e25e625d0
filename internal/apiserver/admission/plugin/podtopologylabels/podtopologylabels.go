// Package podtopologylabels is upstream's PodTopologyLabels plugin (on by default
// since 1.35): a pod assigned to a node gets the node's topology.kubernetes.io/zone
// and topology.kubernetes.io/region labels, so that the pod itself can read where it
// runs (the downward API) and selectors can use them.
package podtopologylabels

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name.
const PluginName = "PodTopologyLabels"

// topologyLabels are the node labels copied, upstream's default configuration.
var topologyLabels = []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion}

var nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")

// Plugin is PodTopologyLabels.
type Plugin struct {
	admission.Ops
	reader admission.Reader
}

// New returns the plugin reading nodes through r.
func New(r admission.Reader) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create, admission.Update}, reader: r}
}

var _ admission.Mutator = (*Plugin)(nil)

// Admit labels a pod created already assigned to a node, and a pod being bound (which
// mizzen's pods/binding admits as the pod it assigns, upstream's as the Binding whose
// labels go onto the pod): node labels overwrite the pod's own.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	if a.Resource.GroupResource() != (corev1.SchemeGroupVersion.WithResource("pods").GroupResource()) {
		return nil
	}
	switch {
	case a.Subresource == "" && a.Operation == admission.Create, a.Subresource == "binding":
	default:
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil
	}
	obj, err := p.reader.Get(ctx, nodesGVR, "", pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		return nil // as upstream: a node not (yet) known adds nothing
	}
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	node := obj.(*corev1.Node)
	for _, key := range topologyLabels {
		if v, ok := node.Labels[key]; ok {
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels[key] = v
		}
	}
	return nil
}
