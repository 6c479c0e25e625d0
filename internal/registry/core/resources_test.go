package core

import (
	"context"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// TestResourcesDiscovery checks each resource's identity as kubectl discovers it.
func TestResourcesDiscovery(t *testing.T) {
	type identity struct {
		kind, singular string
		namespaced     bool
		shortNames     []string
		categories     []string
		hasStatus      bool
	}
	want := map[string]identity{
		"namespaces":             {"Namespace", "namespace", false, []string{"ns"}, nil, true},
		"pods":                   {"Pod", "pod", true, []string{"po"}, []string{"all"}, true},
		"nodes":                  {"Node", "node", false, []string{"no"}, nil, true},
		"services":               {"Service", "service", true, []string{"svc"}, []string{"all"}, true},
		"endpoints":              {"Endpoints", "endpoints", true, []string{"ep"}, nil, false},
		"configmaps":             {"ConfigMap", "configmap", true, []string{"cm"}, nil, false},
		"secrets":                {"Secret", "secret", true, nil, nil, false},
		"serviceaccounts":        {"ServiceAccount", "serviceaccount", true, []string{"sa"}, nil, false},
		"events":                 {"Event", "event", true, []string{"ev"}, nil, false},
		"limitranges":            {"LimitRange", "limitrange", true, []string{"limits"}, nil, false},
		"resourcequotas":         {"ResourceQuota", "resourcequota", true, []string{"quota"}, nil, true},
		"persistentvolumes":      {"PersistentVolume", "persistentvolume", false, []string{"pv"}, nil, true},
		"persistentvolumeclaims": {"PersistentVolumeClaim", "persistentvolumeclaim", true, []string{"pvc"}, nil, true},
		"replicationcontrollers": {"ReplicationController", "replicationcontroller", true, []string{"rc"}, []string{"all"}, true},
		"podtemplates":           {"PodTemplate", "podtemplate", true, nil, nil, false},
	}
	got := Resources()
	if len(got) != len(want) {
		t.Fatalf("Resources() has %d resources, want %d", len(got), len(want))
	}
	for _, r := range got {
		w, ok := want[r.Resource]
		if !ok {
			t.Errorf("unexpected resource %q", r.Resource)
			continue
		}
		if r.GroupVersion != corev1.SchemeGroupVersion || r.Kind != w.kind || r.SingularName != w.singular ||
			r.Namespaced != w.namespaced || !slices.Equal(r.ShortNames, w.shortNames) ||
			!slices.Equal(r.Categories, w.categories) || r.HasStatus != w.hasStatus {
			t.Errorf("%s: got %s %s namespaced=%v short=%v categories=%v status=%v, want %+v",
				r.Resource, r.Kind, r.SingularName, r.Namespaced, r.ShortNames, r.Categories, r.HasStatus, w)
		}
		if (r.Scale != nil) != (r.Resource == "replicationcontrollers") {
			t.Errorf("%s: scale subresource = %v", r.Resource, r.Scale != nil)
		}
		if name := reflect.TypeOf(r.New()).Elem().Name(); name != r.Kind {
			t.Errorf("%s: New() returned a %s, want a %s", r.Resource, name, r.Kind)
		}
		if name := reflect.TypeOf(r.NewList()).Elem().Name(); name != r.Kind+"List" {
			t.Errorf("%s: NewList() returned a %s, want a %sList", r.Resource, name, r.Kind)
		}
	}
}

// TestResourcesNames checks which names each resource accepts.
func TestResourcesNames(t *testing.T) {
	byName := map[string]*registry.Resource{}
	for _, r := range Resources() {
		byName[r.Resource] = r
	}
	tests := []struct {
		resource, name string
		valid          bool
	}{
		{"namespaces", "team-a", true},
		{"namespaces", "team.a", false}, // a DNS label has no dots
		{"services", "web", true},
		{"services", "1web", false}, // a DNS-1035 label starts with a letter
		{"configmaps", "app.config", true},
		{"pods", "Web", false},
	}
	for _, tc := range tests {
		validate := byName[tc.resource].ValidateName
		if validate == nil {
			// nil means DNS-1123 subdomain, checked by the server.
			continue
		}
		if errs := validate(tc.name, false); (len(errs) == 0) != tc.valid {
			t.Errorf("%s name %q: errors %v, want valid=%v", tc.resource, tc.name, errs, tc.valid)
		}
	}
	if byName["pods"].ValidateName != nil || byName["configmaps"].ValidateName != nil {
		t.Errorf("pods and configmaps should use the default DNS-1123 subdomain rule")
	}
}

// TestPrintersRowMatchesColumns prints an empty object of every resource and a
// wrong type: a row has one cell per column, and a wrong type prints nothing.
func TestPrintersRowMatchesColumns(t *testing.T) {
	for _, r := range Resources() {
		if r.Printer == nil {
			t.Errorf("%s has no printer", r.Resource)
			continue
		}
		obj := r.New()
		if r.Strategy != nil {
			r.Strategy.Default(obj)
			r.Strategy.PrepareForCreate(context.Background(), obj)
		}
		if r.Strategy != nil {
			// Empty objects are invalid for most resources; they must not panic.
			_ = r.Strategy.Validate(context.Background(), obj)
			_ = r.Strategy.ValidateUpdate(context.Background(), obj, r.New())
		}
		if cells := r.Printer.Row(obj); len(cells) != len(r.Printer.Columns) {
			t.Errorf("%s: %d cells for %d columns: %#v", r.Resource, len(cells), len(r.Printer.Columns), cells)
		}
		var other runtime.Object = &corev1.Binding{}
		if cells := r.Printer.Row(other); cells != nil {
			t.Errorf("%s printed a Binding: %#v", r.Resource, cells)
		}
		for _, c := range r.Printer.Columns {
			if c.Description == "" {
				t.Errorf("%s: column %q has no description", r.Resource, c.Name)
			}
		}
	}
}

func TestPodTemplates(t *testing.T) {
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tmpl"}, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "web", Image: "nginx"}, {Name: "log", Image: "fluentd:1"}}},
	}}
	r := podTemplatesResource()
	r.Strategy.Default(pt)
	if pt.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways || pt.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("template spec not defaulted: %+v", pt.Template.Spec)
	}
	assertErrors(t, r.Strategy.Validate(context.Background(), pt), nil)
	assertRow(t, r.Printer.Row(pt), []interface{}{"tmpl", "web,log", "nginx,fluentd:1", "app=web"})

	pt.Template.Spec.Containers[1].Image = ""
	assertErrors(t, r.Strategy.Validate(context.Background(), pt), []string{"template.spec.containers[1].image: Required value"})
}

// TestStrategiesRejectOtherTypes: a strategy handed another resource's object
// changes nothing and reports an internal error instead of panicking.
func TestStrategiesRejectOtherTypes(t *testing.T) {
	ctx := context.Background()
	for _, r := range Resources() {
		if r.Strategy == nil {
			continue
		}
		other := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
		r.Strategy.Default(other)
		r.Strategy.PrepareForCreate(ctx, other)
		r.Strategy.PrepareForUpdate(ctx, other, other)
		if other.Name != "b" || len(other.Labels) != 0 {
			t.Errorf("%s changed a Binding: %+v", r.Resource, other)
		}
		errs := r.Strategy.Validate(ctx, other)
		if len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
			t.Errorf("%s: Validate(Binding) = %v, want one internal error", r.Resource, errs)
		}
		if errs := r.Strategy.ValidateUpdate(ctx, r.New(), other); len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
			t.Errorf("%s: ValidateUpdate(_, Binding) = %v, want one internal error", r.Resource, errs)
		}
	}
}
