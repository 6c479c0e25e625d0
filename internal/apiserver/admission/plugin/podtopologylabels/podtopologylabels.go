// Package podtopologylabels is upstream's PodTopologyLabels plugin (on by default
// since 1.35): a pod assigned to a node gets the node's topology.kubernetes.io/zone
// and topology.kubernetes.io/region labels, so that the pod itself can read where it
// runs (the downward API) and selectors can use them.
package podtopologylabels

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	return &Plugin{Ops: admission.Ops{admission.Create}, reader: r}
}

var _ admission.Mutator = (*Plugin)(nil)

// Admit labels a pod created already assigned to a node, and the Binding that assigns
// one (pods/binding copies the Binding's labels onto the pod): node labels overwrite
// the object's own, as upstream's.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	if a.Resource.GroupResource() != (corev1.SchemeGroupVersion.WithResource("pods").GroupResource()) || a.Operation != admission.Create {
		return nil
	}
	var nodeName string
	var meta *metav1.ObjectMeta
	switch obj := a.Object.(type) {
	case *corev1.Pod:
		if a.Subresource != "" {
			return nil
		}
		nodeName, meta = obj.Spec.NodeName, &obj.ObjectMeta
	case *corev1.Binding:
		if a.Subresource != "binding" || obj.Target.Kind != "" && obj.Target.Kind != "Node" {
			return nil
		}
		nodeName, meta = obj.Target.Name, &obj.ObjectMeta
	default:
		return nil
	}
	if nodeName == "" {
		return nil
	}
	got, err := p.reader.Get(ctx, nodesGVR, "", nodeName)
	if apierrors.IsNotFound(err) {
		return nil // as upstream: a node not (yet) known adds nothing
	}
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	node := got.(*corev1.Node)
	for _, key := range topologyLabels {
		if v, ok := node.Labels[key]; ok {
			if meta.Labels == nil {
				meta.Labels = map[string]string{}
			}
			meta.Labels[key] = v
		}
	}
	return nil
}
