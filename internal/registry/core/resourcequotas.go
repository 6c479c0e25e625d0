package core

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/validname"
)

func resourceQuotasResource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "resourcequotas",
		Kind:         "ResourceQuota",
		SingularName: "resourcequota",
		Namespaced:   true,
		ShortNames:   []string{"quota"},
		New:          func() runtime.Object { return &corev1.ResourceQuota{} },
		NewList:      func() runtime.Object { return &corev1.ResourceQuotaList{} },
		Strategy: strategy[*corev1.ResourceQuota]{
			defaults: func(q *corev1.ResourceQuota) {
				roundResourceList(q.Spec.Hard)
				roundResourceList(q.Status.Hard)
				roundResourceList(q.Status.Used)
			},
			prepareCreate: func(_ context.Context, q *corev1.ResourceQuota) { q.Status = corev1.ResourceQuotaStatus{} },
			validate:      validateResourceQuota,
		},
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
			column("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
			registry.AgeColumn,
		}, resourceQuotaRow),
		HasStatus: true,
	}
}

// standardQuotaResources are the unqualified names a quota may limit; others need
// a domain (or the count/<resource> form, which has one).
var standardQuotaResources = sets.New(
	"pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
	"persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
	"cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
	"requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
)

func validateQuotaResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	s := string(name)
	var errs field.ErrorList
	for _, msg := range validname.IsQualifiedName(s) {
		errs = append(errs, field.Invalid(fldPath, s, msg))
	}
	if len(errs) == 0 && !strings.Contains(s, "/") && !standardQuotaResources.Has(s) &&
		!strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(s, "requests.hugepages-") {
		errs = append(errs, field.Invalid(fldPath, s, "must be a standard resource for quota"))
	}
	return errs
}

var validQuotaScopes = []corev1.ResourceQuotaScope{
	corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeCrossNamespacePodAffinity,
	corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopeNotTerminating,
	corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeTerminating,
	corev1.ResourceQuotaScopeVolumeAttributesClass,
}

func validateResourceQuota(_ context.Context, q *corev1.ResourceQuota) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		path *field.Path
		rl   corev1.ResourceList
	}{
		{field.NewPath("spec", "hard"), q.Spec.Hard},
		{field.NewPath("status", "hard"), q.Status.Hard},
		{field.NewPath("status", "used"), q.Status.Used},
	} {
		for _, name := range sortedResourceNames(l.rl) {
			p := l.path.Key(string(name))
			errs = append(errs, validateQuotaResourceName(name, p)...)
			errs = append(errs, validateNonNegativeQuantity(l.rl[name], p)...)
		}
	}
	scopesPath := field.NewPath("spec", "scopes")
	for i, s := range q.Spec.Scopes {
		valid := false
		for _, v := range validQuotaScopes {
			valid = valid || s == v
		}
		if !valid {
			errs = append(errs, field.NotSupported(scopesPath.Index(i), s, validQuotaScopes))
		}
	}
	return errs
}

// resourceQuotaRow prints "used/hard" for every resource, limits.* in LIMIT and the
// rest in REQUEST, sorted by name.
func resourceQuotaRow(q *corev1.ResourceQuota) []interface{} {
	var request, limit bytes.Buffer
	for _, name := range sortedResourceNames(q.Status.Hard) {
		w := &request
		if strings.HasPrefix(string(name), "limits.") {
			w = &limit
		}
		used, hard := q.Status.Used[name], q.Status.Hard[name]
		fmt.Fprintf(w, "%s: %s/%s, ", name, used.String(), hard.String())
	}
	return []interface{}{q.Name, strings.TrimSuffix(request.String(), ", "), strings.TrimSuffix(limit.String(), ", "), registry.Age(q.CreationTimestamp)}
}
