package rbac

import (
	"context"
	"errors"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// EscalationCheck is the apiserver admission step that keeps RBAC from being a way
// up: a Role or ClusterRole may only be written with rules its writer holds (or with
// the escalate verb on it), and a binding only to a role whose rules the writer holds
// (or with the bind verb on it), as upstream's RBAC storage enforces. Members of
// system:masters, and the apiserver's own writes (no user), are not checked.
type EscalationCheck struct {
	a *Authorizer
}

// EscalationCheck returns the admission step backed by this authorizer.
func (a *Authorizer) EscalationCheck() *EscalationCheck { return &EscalationCheck{a: a} }

// Handles says the check looks at creates and updates.
func (e *EscalationCheck) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update
}

// Validate refuses a create or update that would escalate.
func (e *EscalationCheck) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Internal || authz.IsMaster(a.User) {
		return nil
	}
	user, obj, old := a.User, a.Object, a.OldObject
	switch o := obj.(type) {
	case *rbacv1.Role:
		if prev, ok := old.(*rbacv1.Role); ok && apiequality.Semantic.DeepEqual(prev.Rules, o.Rules) {
			return nil
		}
		return e.checkRole(ctx, user, "roles", o.Namespace, o.Name, o.Rules, false)
	case *rbacv1.ClusterRole:
		if prev, ok := old.(*rbacv1.ClusterRole); ok && apiequality.Semantic.DeepEqual(prev.Rules, o.Rules) &&
			apiequality.Semantic.DeepEqual(prev.AggregationRule, o.AggregationRule) {
			return nil
		}
		return e.checkRole(ctx, user, "clusterroles", "", o.Name, o.Rules, o.AggregationRule != nil && len(o.AggregationRule.ClusterRoleSelectors) > 0)
	case *rbacv1.RoleBinding:
		if prev, ok := old.(*rbacv1.RoleBinding); ok && prev.RoleRef == o.RoleRef && apiequality.Semantic.DeepEqual(prev.Subjects, o.Subjects) {
			return nil
		}
		return e.checkBinding(ctx, user, "rolebindings", o.Namespace, o.Name, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		if prev, ok := old.(*rbacv1.ClusterRoleBinding); ok && prev.RoleRef == o.RoleRef && apiequality.Semantic.DeepEqual(prev.Subjects, o.Subjects) {
			return nil
		}
		return e.checkBinding(ctx, user, "clusterrolebindings", "", o.Name, o.RoleRef)
	}
	return nil
}

func groupResource(resource string) schema.GroupResource {
	return schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}
}

// checkRole lets a role be written by a user who may escalate it or holds its rules.
func (e *EscalationCheck) checkRole(ctx context.Context, user registry.User, resource, namespace, name string, rules []rbacv1.PolicyRule, aggregated bool) error {
	escalate := authz.Attributes{User: user, Verb: "escalate", ResourceRequest: true, Group: rbacv1.GroupName,
		Resource: resource, Namespace: namespace, Name: name}
	if ok, _ := e.a.Authorize(ctx, escalate); ok {
		return nil
	}
	if aggregated {
		// An aggregated role takes the rules of roles chosen by labels: only someone
		// holding every permission may define one.
		if err := e.confirmNoEscalation(user, "", fullAuthority); err != nil {
			return apierrors.NewForbidden(groupResource(resource), name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
		}
	}
	if err := e.confirmNoEscalation(user, namespace, rules); err != nil {
		return apierrors.NewForbidden(groupResource(resource), name, err)
	}
	return nil
}

// checkBinding lets a binding be written by a user who may bind its role or holds the
// role's rules.
func (e *EscalationCheck) checkBinding(ctx context.Context, user registry.User, resource, namespace, name string, ref rbacv1.RoleRef) error {
	refResource := "clusterroles"
	if ref.Kind == "Role" {
		refResource = "roles"
	}
	bind := authz.Attributes{User: user, Verb: "bind", ResourceRequest: true, Group: ref.APIGroup,
		Resource: refResource, Namespace: namespace, Name: ref.Name}
	if ok, _ := e.a.Authorize(ctx, bind); ok {
		return nil
	}
	rules, err := e.a.roleRefRules(ref, namespace)
	if err != nil {
		return apierrors.NewForbidden(groupResource(resource), name, err)
	}
	if err := e.confirmNoEscalation(user, namespace, rules); err != nil {
		return apierrors.NewForbidden(groupResource(resource), name, err)
	}
	return nil
}

// roleRefRules are the rules of the role a binding in namespace refers to.
func (a *Authorizer) roleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	switch ref.Kind {
	case "ClusterRole":
		if r := a.clusterRoles[ref.Name]; r != nil {
			return r.Rules, nil
		}
		return nil, apierrors.NewNotFound(groupResource("clusterroles"), ref.Name)
	case "Role":
		if r := a.roles[namespace+"/"+ref.Name]; r != nil && namespace != "" {
			return r.Rules, nil
		}
		return nil, apierrors.NewNotFound(groupResource("roles"), ref.Name)
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// confirmNoEscalation fails, with upstream's message listing what is missing, unless
// the user holds every rule in namespace.
func (e *EscalationCheck) confirmNoEscalation(user registry.User, namespace string, rules []rbacv1.PolicyRule) error {
	ok, missing := Covers(e.a.RulesFor(user, namespace), rules)
	if ok {
		return nil
	}
	lines := make([]string, len(missing))
	for i, r := range missing {
		lines[i] = CompactString(r)
	}
	return fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		user.Name, user.Groups, strings.Join(lines, "\n"))
}
