// Package node is upstream's Node authorizer: a kubelet (user system:node:NAME in
// group system:nodes) may read a Secret, ConfigMap, PersistentVolumeClaim,
// PersistentVolume or ResourceClaim, and ask for a ServiceAccount's token, only when
// a pod bound to its node uses it; what it may do with every other resource is the system:node
// role's rules, which the authorizer holds itself (upstream binds that role to
// nobody). The graph of pods and the objects they use is kept from the apiserver's
// watch cache (authz.Follower). Requests from anyone else get no opinion, for the
// next authorizer (RBAC) to decide.
package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/apiserver/authz/rbac"
)

const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
	resourceGroup  = "resource.k8s.io"
)

var (
	podsGR = schema.GroupResource{Resource: "pods"}
	pvcsGR = schema.GroupResource{Resource: "persistentvolumeclaims"}
)

// ref names an object a pod uses.
type ref struct{ resource, namespace, name string }

// Authorizer is the Node authorizer.
type Authorizer struct {
	rules []rbacv1.PolicyRule

	mu sync.RWMutex
	// pods are each pod's node and what it uses; byNode counts the uses per node.
	pods   map[string]podUses
	byNode map[string]map[ref]int
	// volumes is each PVC's bound volume.
	volumes map[string]string
}

type podUses struct {
	node string
	refs []ref
}

// New is a Node authorizer granting nodes rules beyond their graph (the system:node
// role's).
func New(rules []rbacv1.PolicyRule) *Authorizer {
	return &Authorizer{rules: rules, pods: map[string]podUses{}, byNode: map[string]map[ref]int{}, volumes: map[string]string{}}
}

var _ authz.FieldSifter = (*Authorizer)(nil)

// Resources are the resources the graph follows.
func (a *Authorizer) Resources() []schema.GroupResource {
	return []schema.GroupResource{podsGR, pvcsGR}
}

// Ignores leaves out a pod without a node: its node name is set once, by its binding,
// and a pod without one is in no node's graph (apply keeps none).
func (a *Authorizer) Ignores(gr schema.GroupResource, selectable fields.Fields) bool {
	return gr == podsGR && selectable.Has("spec.nodeName") && selectable.Get("spec.nodeName") == ""
}

// Replace starts the graph of one resource over.
func (a *Authorizer) Replace(gr schema.GroupResource, objs []runtime.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch gr {
	case podsGR:
		a.pods, a.byNode = map[string]podUses{}, map[string]map[ref]int{}
	case pvcsGR:
		a.volumes = map[string]string{}
	}
	for _, obj := range objs {
		a.apply(obj, false)
	}
}

// Apply takes one change.
func (a *Authorizer) Apply(obj runtime.Object, deleted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.apply(obj, deleted)
}

func (a *Authorizer) apply(obj runtime.Object, deleted bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		key := o.Namespace + "/" + o.Name
		a.forget(key)
		if !deleted && o.Spec.NodeName != "" {
			uses := podUses{node: o.Spec.NodeName, refs: podRefs(o)}
			a.pods[key] = uses
			counts := a.byNode[uses.node]
			if counts == nil {
				counts = map[ref]int{}
				a.byNode[uses.node] = counts
			}
			for _, r := range uses.refs {
				counts[r]++
			}
		}
	case *corev1.PersistentVolumeClaim:
		key := o.Namespace + "/" + o.Name
		if deleted || o.Spec.VolumeName == "" {
			delete(a.volumes, key)
		} else {
			a.volumes[key] = o.Spec.VolumeName
		}
	}
}

func (a *Authorizer) forget(key string) {
	old, ok := a.pods[key]
	if !ok {
		return
	}
	delete(a.pods, key)
	counts := a.byNode[old.node]
	for _, r := range old.refs {
		if counts[r]--; counts[r] <= 0 {
			delete(counts, r)
		}
	}
	if len(counts) == 0 {
		delete(a.byNode, old.node)
	}
}

// podRefs are the Secrets, ConfigMaps, PVCs, ResourceClaims and ServiceAccount a pod
// uses.
func podRefs(p *corev1.Pod) []ref {
	var out []ref
	add := func(resource, name string) {
		if name == "" {
			return
		}
		r := ref{resource, p.Namespace, name}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	add("serviceaccounts", p.Spec.ServiceAccountName)
	// A claim named in the spec, or made from a template for this pod (its name in
	// the pod's status, as upstream's graph reads it).
	for _, c := range p.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			add("resourceclaims", *c.ResourceClaimName)
		}
	}
	for _, c := range p.Status.ResourceClaimStatuses {
		if c.ResourceClaimName != nil {
			add("resourceclaims", *c.ResourceClaimName)
		}
	}
	for _, s := range p.Spec.ImagePullSecrets {
		add("secrets", s.Name)
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Secret != nil:
			add("secrets", v.Secret.SecretName)
		case v.ConfigMap != nil:
			add("configmaps", v.ConfigMap.Name)
		case v.PersistentVolumeClaim != nil:
			add("persistentvolumeclaims", v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			add("persistentvolumeclaims", p.Name+"-"+v.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					add("secrets", s.Secret.Name)
				}
				if s.ConfigMap != nil {
					add("configmaps", s.ConfigMap.Name)
				}
			}
		case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
			add("secrets", v.CSI.NodePublishSecretRef.Name)
		}
	}
	containers := append(append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...), ephemeral(p)...)
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				add("secrets", e.SecretRef.Name)
			}
			if e.ConfigMapRef != nil {
				add("configmaps", e.ConfigMapRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if e.ValueFrom.SecretKeyRef != nil {
				add("secrets", e.ValueFrom.SecretKeyRef.Name)
			}
			if e.ValueFrom.ConfigMapKeyRef != nil {
				add("configmaps", e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	return out
}

func ephemeral(p *corev1.Pod) []corev1.Container {
	var out []corev1.Container
	for _, e := range p.Spec.EphemeralContainers {
		out = append(out, corev1.Container(e.EphemeralContainerCommon))
	}
	return out
}

// NodeName is the node a user is the kubelet of, if it is one.
func NodeName(u authz.Attributes) (string, bool) {
	name, ok := strings.CutPrefix(u.User.Name, nodeUserPrefix)
	return name, ok && name != "" && slices.Contains(u.User.Groups, nodesGroup)
}

// Authorize decides a kubelet's request; anyone else's gets no opinion.
func (a *Authorizer) Authorize(_ context.Context, attrs authz.Attributes) (bool, string) {
	node, ok := NodeName(attrs)
	if !ok {
		return false, ""
	}
	if attrs.ResourceRequest && attrs.Group == resourceGroup && attrs.Resource == "resourceclaims" && attrs.Subresource == "" {
		if attrs.Verb != "get" {
			return false, "can only get individual resources of this type"
		}
		return a.related(node, attrs)
	}
	if attrs.ResourceRequest && attrs.Group == "" {
		switch {
		case attrs.Subresource == "" && attrs.Resource == "persistentvolumes":
			if attrs.Verb != "get" {
				return false, "can only get individual resources of this type"
			}
			return a.related(node, attrs)
		case slices.Contains([]string{"secrets", "configmaps", "persistentvolumeclaims"}, attrs.Resource):
			// Read, one object at a time: a list or watch names it with
			// fieldSelector=metadata.name=NAME (see the request's attributes).
			if !slices.Contains([]string{"get", "list", "watch"}, attrs.Verb) {
				return false, "can only read resources of this type"
			}
			if attrs.Subresource != "" {
				return false, "cannot read subresource"
			}
			if attrs.Namespace == "" {
				return false, "can only read namespaced object of this type"
			}
			return a.related(node, attrs)
		case attrs.Resource == "serviceaccounts" && attrs.Subresource == "token":
			if attrs.Verb != "create" {
				return false, "can only create tokens for individual service accounts"
			}
			return a.related(node, attrs)
		case attrs.Resource == "serviceaccounts" && attrs.Subresource == "":
			// A pod certificate request names its pod's service account by UID.
			if attrs.Verb != "get" {
				return false, "can only get individual service accounts"
			}
			return a.related(node, attrs)
		}
	}
	for i := range a.rules {
		if rbac.RuleAllows(attrs, &a.rules[i]) {
			return true, ""
		}
	}
	return false, ""
}

// related allows the request when a pod on node uses the object it names.
func (a *Authorizer) related(node string, attrs authz.Attributes) (bool, string) {
	if attrs.Name == "" {
		return false, "No Object name found"
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	counts := a.byNode[node]
	if attrs.Resource == "persistentvolumes" {
		for r := range counts {
			if r.resource == "persistentvolumeclaims" && a.volumes[r.namespace+"/"+r.name] == attrs.Name {
				return true, ""
			}
		}
	} else if counts[ref{attrs.Resource, attrs.Namespace, attrs.Name}] > 0 {
		return true, ""
	}
	return false, fmt.Sprintf("no relationship found between node '%s' and this object", node)
}
