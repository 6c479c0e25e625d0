package autoscaling

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type wantError struct {
	field string
	typ   field.ErrorType
}

func createErrors(obj runtime.Object) field.ErrorList {
	ctx := context.Background()
	s := HorizontalPodAutoscalersV2().Strategy
	s.Default(obj)
	s.PrepareForCreate(ctx, obj)
	return s.Validate(ctx, obj)
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
