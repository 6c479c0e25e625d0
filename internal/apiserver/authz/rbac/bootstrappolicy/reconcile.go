package bootstrappolicy

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	rbacauthz "mizzen/internal/apiserver/authz/rbac"
)

// Item is one default object and how to bring an existing one up to it.
type Item struct {
	// Desired is created when missing.
	Desired runtime.Object
	// Reconcile gets a copy of the stored object and returns it with what the default
	// adds, and whether that changed anything. An object whose roleRef differs from the
	// default's cannot be updated (roleRef is immutable) and is left as it is.
	Reconcile func(current runtime.Object) (runtime.Object, bool)
}

// Items lists the default policy: the roles first, then their bindings.
func Items() []Item {
	var out []Item
	for _, r := range append(append(append(ClusterRoles(), AddonClusterRoles()...), joinClusterRoles()...), ControllerClusterRoles()...) {
		out = append(out, item(&r, ReconcileClusterRole))
	}
	for _, r := range append(append(Roles(), joinRoles()...), controllerRoles()...) {
		out = append(out, item(&r, ReconcileRole))
	}
	for _, b := range append(append(RoleBindings(), joinRoleBindings()...), controllerRoleBindings()...) {
		out = append(out, item(&b, ReconcileRoleBinding))
	}
	for _, b := range append(append(append(ClusterRoleBindings(), AddonClusterRoleBindings()...), joinClusterRoleBindings()...), ControllerClusterRoleBindings()...) {
		out = append(out, item(&b, ReconcileClusterRoleBinding))
	}
	return out
}

// item pairs a desired object with its typed reconcile function.
func item[T runtime.Object](desired T, reconcile func(existing, desired T) (T, bool)) Item {
	return Item{Desired: desired, Reconcile: func(current runtime.Object) (runtime.Object, bool) {
		existing, ok := current.(T)
		if !ok {
			return current, false
		}
		return reconcile(existing, desired)
	}}
}

// autoUpdate reports whether an existing object may be reconciled.
func autoUpdate(m *metav1.ObjectMeta) bool { return m.Annotations[AutoUpdateAnnotation] != "false" }

// mergeMetadata adds the desired labels and annotations the object lacks; values it
// has are kept.
func mergeMetadata(existing, desired *metav1.ObjectMeta) bool {
	changed := false
	merge := func(have *map[string]string, want map[string]string) {
		for k, v := range want {
			if _, ok := (*have)[k]; ok {
				continue
			}
			if *have == nil {
				*have = map[string]string{}
			}
			(*have)[k] = v
			changed = true
		}
	}
	merge(&existing.Labels, desired.Labels)
	merge(&existing.Annotations, desired.Annotations)
	return changed
}

// ReconcileClusterRole adds to existing the labels, annotations and rules of desired
// it lacks (a rule counts as present when existing rules cover it), or the aggregation
// selectors for an aggregated role, whose rules the aggregation controller owns.
func ReconcileClusterRole(existing, desired *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
	if !autoUpdate(&existing.ObjectMeta) {
		return existing, false
	}
	changed := mergeMetadata(&existing.ObjectMeta, &desired.ObjectMeta)
	if desired.AggregationRule != nil {
		if existing.AggregationRule == nil {
			existing.AggregationRule = &rbacv1.AggregationRule{}
		}
		for _, sel := range desired.AggregationRule.ClusterRoleSelectors {
			if !slices.ContainsFunc(existing.AggregationRule.ClusterRoleSelectors, func(s metav1.LabelSelector) bool {
				return apiequality.Semantic.DeepEqual(s, sel)
			}) {
				existing.AggregationRule.ClusterRoleSelectors = append(existing.AggregationRule.ClusterRoleSelectors, sel)
				changed = true
			}
		}
		return existing, changed
	}
	var added bool
	existing.Rules, added = addMissingRules(existing.Rules, desired.Rules)
	return existing, changed || added
}

// ReconcileRole adds to existing the labels, annotations and rules of desired it lacks.
func ReconcileRole(existing, desired *rbacv1.Role) (*rbacv1.Role, bool) {
	if !autoUpdate(&existing.ObjectMeta) {
		return existing, false
	}
	changed := mergeMetadata(&existing.ObjectMeta, &desired.ObjectMeta)
	var added bool
	existing.Rules, added = addMissingRules(existing.Rules, desired.Rules)
	return existing, changed || added
}

// addMissingRules appends the desired rules that have is not covering.
func addMissingRules(have, desired []rbacv1.PolicyRule) ([]rbacv1.PolicyRule, bool) {
	added := false
	for _, r := range desired {
		if ok, _ := rbacauthz.Covers(have, []rbacv1.PolicyRule{r}); !ok {
			have = append(have, r)
			added = true
		}
	}
	return have, added
}

// ReconcileClusterRoleBinding adds to existing the labels, annotations and subjects of
// desired it lacks, when both refer to the same role.
func ReconcileClusterRoleBinding(existing, desired *rbacv1.ClusterRoleBinding) (*rbacv1.ClusterRoleBinding, bool) {
	if !autoUpdate(&existing.ObjectMeta) || existing.RoleRef != desired.RoleRef {
		return existing, false
	}
	changed := mergeMetadata(&existing.ObjectMeta, &desired.ObjectMeta)
	var added bool
	existing.Subjects, added = addMissingSubjects(existing.Subjects, desired.Subjects)
	return existing, changed || added
}

// ReconcileRoleBinding is ReconcileClusterRoleBinding for a RoleBinding.
func ReconcileRoleBinding(existing, desired *rbacv1.RoleBinding) (*rbacv1.RoleBinding, bool) {
	if !autoUpdate(&existing.ObjectMeta) || existing.RoleRef != desired.RoleRef {
		return existing, false
	}
	changed := mergeMetadata(&existing.ObjectMeta, &desired.ObjectMeta)
	var added bool
	existing.Subjects, added = addMissingSubjects(existing.Subjects, desired.Subjects)
	return existing, changed || added
}

func addMissingSubjects(have, desired []rbacv1.Subject) ([]rbacv1.Subject, bool) {
	added := false
	for _, s := range desired {
		if !slices.ContainsFunc(have, func(e rbacv1.Subject) bool {
			return e.Kind == s.Kind && e.Name == s.Name && e.Namespace == s.Namespace
		}) {
			have = append(have, s)
			added = true
		}
	}
	return have, added
}
