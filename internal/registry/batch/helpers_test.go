package batch

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// piTemplate is a minimal valid job pod template.
func piTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "pi", Image: "perl:5.34", Command: []string{"perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"}}},
	}}
}

type wantError struct {
	field string
	typ   field.ErrorType
}

func createErrors(res *registry.Resource, obj runtime.Object) field.ErrorList {
	ctx := context.Background()
	res.Strategy.Default(obj)
	res.Strategy.PrepareForCreate(ctx, obj)
	return res.Strategy.Validate(ctx, obj)
}

func updateErrors(res *registry.Resource, obj, old runtime.Object) field.ErrorList {
	ctx := context.Background()
	res.Strategy.PrepareForUpdate(ctx, obj, old)
	return res.Strategy.ValidateUpdate(ctx, obj, old)
}

func checkErrors(t *testing.T, errs field.ErrorList, want []wantError) {
	t.Helper()
	got := map[wantError]int{}
	for _, e := range errs {
		got[wantError{e.Field, e.Type}]++
	}
	for _, w := range want {
		if got[w] == 0 {
			t.Errorf("missing error %s %q; got %v", w.typ, w.field, errs)
			continue
		}
		got[w]--
	}
	for w, n := range got {
		if n > 0 {
			t.Errorf("unexpected error %s %q; all: %v", w.typ, w.field, errs)
		}
	}
}

// checkRow asserts a printed row, with the age cell (at ageIndex) left out.
func checkRow(t *testing.T, p *registry.Printer, obj runtime.Object, ageIndex int, want []interface{}) {
	t.Helper()
	row := p.Row(obj)
	if len(row) != len(p.Columns) {
		t.Fatalf("row has %d cells for %d columns: %v", len(row), len(p.Columns), row)
	}
	if p.Columns[ageIndex].Name != "Age" {
		t.Fatalf("column %d is %q, not Age", ageIndex, p.Columns[ageIndex].Name)
	}
	got := append(append([]interface{}{}, row[:ageIndex]...), row[ageIndex+1:]...)
	if len(got) != len(want) {
		t.Fatalf("cells = %#v, want %#v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cell %d = %#v, want %#v (row %#v)", i, got[i], want[i], got)
		}
	}
}

func columnNames(p *registry.Printer) []string {
	var names []string
	for _, c := range p.Columns {
		names = append(names, c.Name)
	}
	return names
}
