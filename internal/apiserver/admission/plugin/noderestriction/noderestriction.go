// Package noderestriction is upstream's NodeRestriction admission plugin: a kubelet
// (system:node:NAME in system:nodes) may change only its own Node and Lease (and
// CSINode), create only mirror pods bound to itself that use no Secrets, ConfigMaps,
// PVCs or ServiceAccount, delete and evict only pods bound to it and update only
// their status, and may not set or change labels it has no business with (under
// node-restriction.kubernetes.io/, or kubernetes.io and k8s.io ones outside upstream's
// allowed list) nor change its taints after registering.
package noderestriction

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name.
const PluginName = "NodeRestriction"

const mirrorAnnotation = "kubernetes.io/config.mirror"

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// Plugin is NodeRestriction.
type Plugin struct {
	admission.Ops
	reader admission.Reader
}

// New returns the plugin; reader finds the pods a request names.
func New(reader admission.Reader) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create, admission.Update, admission.Delete}, reader: reader}
}

var _ admission.Mutator = (*Plugin)(nil)

// nodeOf is the node a requester is the kubelet of.
func nodeOf(a *admission.Attributes) (string, bool) {
	name, ok := strings.CutPrefix(a.User.Name, "system:node:")
	return name, ok && name != "" && slices.Contains(a.User.Groups, "system:nodes")
}

// Admit refuses what a kubelet may not do; it changes nothing. It runs among the
// mutating plugins, as upstream's does.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	node, ok := nodeOf(a)
	if !ok || a.Internal {
		return nil
	}
	var err error
	switch a.Resource.GroupResource() {
	case schema.GroupResource{Resource: "pods"}:
		err = p.pod(ctx, node, a)
	case schema.GroupResource{Resource: "nodes"}:
		err = nodeChange(node, a)
	case schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}:
		if a.Namespace != corev1.NamespaceNodeLease || a.Name != node {
			err = fmt.Errorf("can only access node lease with the same name as the requesting node")
		}
	case schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}:
		if a.Name != node {
			err = fmt.Errorf("node %q is not allowed to modify object %q", node, a.Name)
		}
	}
	if err != nil {
		return admission.NewForbidden(a, err)
	}
	return nil
}

func (p *Plugin) pod(ctx context.Context, node string, a *admission.Attributes) error {
	switch {
	case a.Subresource == "" && a.Operation == admission.Create:
		pod, ok := a.Object.(*corev1.Pod)
		if !ok {
			return nil
		}
		if _, mirror := pod.Annotations[mirrorAnnotation]; !mirror {
			return fmt.Errorf("pod does not have %q annotation, node %q can only create mirror pods", mirrorAnnotation, node)
		}
		if pod.Spec.NodeName != node {
			return fmt.Errorf("node %q can only create pods with spec.nodeName set to itself", node)
		}
		for _, o := range pod.OwnerReferences {
			if o.Kind != "Node" || o.Name != node {
				return fmt.Errorf("node %q can only create pods with an owner reference set to itself", node)
			}
		}
		if pod.Spec.ServiceAccountName != "" {
			return fmt.Errorf("node %q can not create pods that reference a service account", node)
		}
		for _, v := range pod.Spec.Volumes {
			switch {
			case v.Secret != nil:
				return fmt.Errorf("node %q can not create pods that reference secrets", node)
			case v.ConfigMap != nil:
				return fmt.Errorf("node %q can not create pods that reference configmaps", node)
			case v.PersistentVolumeClaim != nil, v.Ephemeral != nil:
				return fmt.Errorf("node %q can not create pods that reference persistentvolumeclaims", node)
			}
		}
		return nil
	case a.Subresource == "" && a.Operation == admission.Delete, a.Subresource == "status", a.Subresource == "eviction":
		pod, ok := a.OldObject.(*corev1.Pod)
		if !ok {
			obj, err := p.reader.Get(ctx, podsGVR, a.Namespace, a.Name)
			if err != nil {
				return nil // nothing to protect: the request fails on its own
			}
			if pod, ok = obj.(*corev1.Pod); !ok {
				return nil
			}
		}
		if pod.Spec.NodeName != node {
			what := map[string]string{"": "delete pods", "status": "update pod status for pods", "eviction": "evict pods"}[a.Subresource]
			return fmt.Errorf("node %q can only %s with spec.nodeName set to itself", node, what)
		}
		return nil
	case a.Subresource == "" && a.Operation == admission.Update:
		return fmt.Errorf("node %q is not allowed to update pods", node)
	}
	return nil
}

func nodeChange(node string, a *admission.Attributes) error {
	if a.Name != node && a.Name != "" {
		return fmt.Errorf("node %q is not allowed to modify node %q", node, a.Name)
	}
	if a.Operation == admission.Delete {
		return nil
	}
	obj, ok := a.Object.(*corev1.Node)
	if !ok {
		return nil
	}
	if obj.Name != node {
		return fmt.Errorf("node %q is not allowed to modify node %q", node, obj.Name)
	}
	old, _ := a.OldObject.(*corev1.Node)
	if old == nil {
		if bad := forbiddenLabels(obj.Labels, nil); len(bad) > 0 {
			return fmt.Errorf("node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
		return nil
	}
	if bad := forbiddenLabels(obj.Labels, old.Labels); len(bad) > 0 {
		return fmt.Errorf("node %q is not allowed to modify labels: %s", node, strings.Join(bad, ", "))
	}
	if a.Subresource == "" && !slices.EqualFunc(obj.Spec.Taints, old.Spec.Taints, func(x, y corev1.Taint) bool { return x.MatchTaint(&y) && x.Value == y.Value }) {
		return fmt.Errorf("node %q is not allowed to modify taints", node)
	}
	return nil
}

// forbiddenLabels are the labels changed from old that a kubelet may not set.
func forbiddenLabels(labels, old map[string]string) []string {
	var bad []string
	for k, v := range labels {
		if ov, had := old[k]; had && ov == v {
			continue
		}
		if !allowedLabel(k) {
			bad = append(bad, k)
		}
	}
	for k := range old {
		if _, kept := labels[k]; !kept && !allowedLabel(k) {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	return bad
}

// allowedLabel is upstream's rule for labels a kubelet may set: none under
// node-restriction.kubernetes.io/; of the kubernetes.io and k8s.io namespaces only the
// kubelet's own and the well-known topology ones.
func allowedLabel(key string) bool {
	prefix, _, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		return true
	}
	if prefix == "node-restriction.kubernetes.io" || strings.HasSuffix(prefix, ".node-restriction.kubernetes.io") {
		return false
	}
	if !isKubernetesNamespace(prefix) {
		return true
	}
	switch key {
	case "kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
		"beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
		"beta.kubernetes.io/arch", "beta.kubernetes.io/os",
		"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
		"topology.kubernetes.io/region", "topology.kubernetes.io/zone":
		return true
	}
	return prefix == "kubelet.kubernetes.io" || strings.HasSuffix(prefix, ".kubelet.kubernetes.io") ||
		prefix == "node.kubernetes.io" || strings.HasSuffix(prefix, ".node.kubernetes.io")
}

func isKubernetesNamespace(prefix string) bool {
	return prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io") || prefix == "k8s.io" || strings.HasSuffix(prefix, ".k8s.io")
}
