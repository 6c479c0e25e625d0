// Package rbac is the RBAC authorizer (--authorization-mode=RBAC): it answers whether
// a user may make a request from the Roles, ClusterRoles, RoleBindings and
// ClusterRoleBindings it is fed, and it refuses role and binding writes that would
// grant more than the writer holds (escalation prevention). It keeps its own index of
// bindings by subject, so that a request costs a few map lookups and the rules of the
// bindings that name the user, never a scan of every role.
//
// The apiserver feeds it from its watch cache (Replace, then Apply per change); this
// package does not import the apiserver.
package rbac

import (
	"context"
	"fmt"
	"slices"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

var (
	rolesGR               = rbacv1.SchemeGroupVersion.WithResource("roles").GroupResource()
	clusterRolesGR        = rbacv1.SchemeGroupVersion.WithResource("clusterroles").GroupResource()
	roleBindingsGR        = rbacv1.SchemeGroupVersion.WithResource("rolebindings").GroupResource()
	clusterRoleBindingsGR = rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings").GroupResource()
)

// Authorizer is the RBAC authorizer. The zero value is not usable; call New.
type Authorizer struct {
	mu           sync.RWMutex
	roles        map[string]*rbacv1.Role // namespace/name
	clusterRoles map[string]*rbacv1.ClusterRole
	// bindings are every RoleBinding (namespace/name) and ClusterRoleBinding (/name).
	bindings map[string]*binding
	// bySubject indexes bindings by the users and groups they name.
	bySubject map[subjectKey][]subjectRef
	synced    map[schema.GroupResource]bool
}

// binding is a RoleBinding (namespace set) or a ClusterRoleBinding.
type binding struct {
	namespace string
	name      string
	roleRef   rbacv1.RoleRef
	subjects  []rbacv1.Subject
}

// subjectKey is a user name or a group name; service account subjects are indexed
// under their user name, system:serviceaccount:<namespace>:<name>.
type subjectKey struct {
	group bool
	name  string
}

// subjectRef is one subject of one binding, with the reason an allowed request is
// given, computed once here rather than per request.
type subjectRef struct {
	b      *binding
	reason string
}

// New returns an authorizer that knows no objects yet.
func New() *Authorizer {
	return &Authorizer{
		roles: map[string]*rbacv1.Role{}, clusterRoles: map[string]*rbacv1.ClusterRole{},
		bindings: map[string]*binding{}, bySubject: map[subjectKey][]subjectRef{},
		synced: map[schema.GroupResource]bool{},
	}
}

// Resources are the resources the authorizer must be fed.
func (a *Authorizer) Resources() []schema.GroupResource {
	return []schema.GroupResource{rolesGR, clusterRolesGR, roleBindingsGR, clusterRoleBindingsGR}
}

// Synced reports whether every resource has been fed its full list once.
func (a *Authorizer) Synced() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.synced) == len(a.Resources())
}

// Replace sets every object of one resource at once: the initial list, or a new list
// after the feed was interrupted (objects missing from it are forgotten). The
// authorizer keeps the objects and never changes them.
func (a *Authorizer) Replace(gr schema.GroupResource, objs []runtime.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch gr {
	case rolesGR:
		clear(a.roles)
	case clusterRolesGR:
		clear(a.clusterRoles)
	case roleBindingsGR, clusterRoleBindingsGR:
		for key, b := range a.bindings {
			if (b.namespace != "") == (gr == roleBindingsGR) {
				a.removeBinding(key)
			}
		}
	default:
		return
	}
	for _, obj := range objs {
		a.apply(obj, false)
	}
	a.synced[gr] = true
}

// Apply records one change: obj added or modified, or deleted.
func (a *Authorizer) Apply(obj runtime.Object, deleted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.apply(obj, deleted)
}

func (a *Authorizer) apply(obj runtime.Object, deleted bool) {
	switch o := obj.(type) {
	case *rbacv1.Role:
		key := o.Namespace + "/" + o.Name
		if deleted {
			delete(a.roles, key)
		} else {
			a.roles[key] = o
		}
	case *rbacv1.ClusterRole:
		if deleted {
			delete(a.clusterRoles, o.Name)
		} else {
			a.clusterRoles[o.Name] = o
		}
	case *rbacv1.RoleBinding:
		key := o.Namespace + "/" + o.Name
		a.removeBinding(key)
		if !deleted {
			a.addBinding(key, &binding{namespace: o.Namespace, name: o.Name, roleRef: o.RoleRef, subjects: o.Subjects})
		}
	case *rbacv1.ClusterRoleBinding:
		key := "/" + o.Name
		a.removeBinding(key)
		if !deleted {
			a.addBinding(key, &binding{name: o.Name, roleRef: o.RoleRef, subjects: o.Subjects})
		}
	}
}

func (a *Authorizer) addBinding(key string, b *binding) {
	a.bindings[key] = b
	for i := range b.subjects {
		if k, ok := subjectKeyOf(&b.subjects[i], b.namespace); ok {
			a.bySubject[k] = append(a.bySubject[k], subjectRef{b: b, reason: describe(b, &b.subjects[i])})
		}
	}
}

func (a *Authorizer) removeBinding(key string) {
	b := a.bindings[key]
	if b == nil {
		return
	}
	delete(a.bindings, key)
	for i := range b.subjects {
		k, ok := subjectKeyOf(&b.subjects[i], b.namespace)
		if !ok {
			continue
		}
		refs := slices.DeleteFunc(a.bySubject[k], func(r subjectRef) bool { return r.b == b })
		if len(refs) == 0 {
			delete(a.bySubject, k)
		} else {
			a.bySubject[k] = refs
		}
	}
}

// subjectKeyOf is where a subject is indexed. A service account subject without a
// namespace means the binding's namespace, as upstream.
func subjectKeyOf(s *rbacv1.Subject, bindingNamespace string) (subjectKey, bool) {
	switch s.Kind {
	case rbacv1.UserKind:
		return subjectKey{name: s.Name}, true
	case rbacv1.GroupKind:
		return subjectKey{group: true, name: s.Name}, true
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		if ns == "" {
			return subjectKey{}, false
		}
		return subjectKey{name: ServiceAccountUser(ns, s.Name)}, true
	}
	return subjectKey{}, false
}

// ServiceAccountUser is the user name a service account's tokens authenticate as.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// visit calls fn with every binding that names the user and applies in namespace
// (ClusterRoleBindings always, RoleBindings of that namespace), and the rules of the
// role it refers to, until fn returns false. A binding naming the user twice is
// visited twice. The caller holds a.mu.
func (a *Authorizer) visit(user registry.User, namespace string, fn func(ref subjectRef, rules []rbacv1.PolicyRule) bool) {
	visitKey := func(k subjectKey) bool {
		for _, ref := range a.bySubject[k] {
			b := ref.b
			if b.namespace != "" && b.namespace != namespace {
				continue
			}
			rules, ok := a.rulesOf(b)
			if !ok {
				continue
			}
			if !fn(ref, rules) {
				return false
			}
		}
		return true
	}
	if !visitKey(subjectKey{name: user.Name}) {
		return
	}
	for _, g := range user.Groups {
		if !visitKey(subjectKey{group: true, name: g}) {
			return
		}
	}
}

// rulesOf resolves a binding's roleRef; a binding to a missing role grants nothing.
func (a *Authorizer) rulesOf(b *binding) ([]rbacv1.PolicyRule, bool) {
	switch b.roleRef.Kind {
	case "ClusterRole":
		if r := a.clusterRoles[b.roleRef.Name]; r != nil {
			return r.Rules, true
		}
	case "Role":
		if b.namespace == "" {
			return nil, false
		}
		if r := a.roles[b.namespace+"/"+b.roleRef.Name]; r != nil {
			return r.Rules, true
		}
	}
	return nil, false
}

// Authorize allows a request some rule of a role bound to the user grants. Members of
// system:masters are always allowed.
func (a *Authorizer) Authorize(_ context.Context, attrs authz.Attributes) (bool, string) {
	if authz.IsMaster(attrs.User) {
		return true, ""
	}
	ns := attrs.Namespace
	if !attrs.ResourceRequest {
		ns = ""
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	var reason string
	a.visit(attrs.User, ns, func(ref subjectRef, rules []rbacv1.PolicyRule) bool {
		for i := range rules {
			if RuleAllows(attrs, &rules[i]) {
				reason = ref.reason
				return false
			}
		}
		return true
	})
	return reason != "", reason
}

// describe is upstream's reason for an allowed request.
func describe(b *binding, s *rbacv1.Subject) string {
	subject := fmt.Sprintf("%s %q", s.Kind, s.Name)
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = b.namespace
		}
		subject = fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	if b.namespace == "" {
		return fmt.Sprintf("RBAC: allowed by ClusterRoleBinding %q of %s %q to %s", b.name, b.roleRef.Kind, b.roleRef.Name, subject)
	}
	return fmt.Sprintf("RBAC: allowed by RoleBinding %q of %s %q to %s", b.name+"/"+b.namespace, b.roleRef.Kind, b.roleRef.Name, subject)
}

// fullAuthority is every permission: what system:masters holds.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// RulesFor lists the rules the user holds in namespace ("" for cluster-wide rules
// only): those of every role bound to the user there, in binding order, each
// binding's rules once; members of system:masters hold everything.
func (a *Authorizer) RulesFor(user registry.User, namespace string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	if authz.IsMaster(user) {
		out = append(out, fullAuthority...)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	seen := map[*binding]bool{}
	a.visit(user, namespace, func(ref subjectRef, rules []rbacv1.PolicyRule) bool {
		if !seen[ref.b] {
			seen[ref.b] = true
			out = append(out, rules...)
		}
		return true
	})
	return out
}
