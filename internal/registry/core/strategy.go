package core

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// strategy adapts typed functions for one Go type T to registry.Strategy. Nil
// functions do nothing (or find nothing wrong).
type strategy[T runtime.Object] struct {
	defaults      func(obj T)
	prepareCreate func(ctx context.Context, obj T)
	prepareUpdate func(ctx context.Context, obj, old T)
	// validate runs on create and on update (on the new object); validateCreate
	// only on create; validateUpdate only on update.
	validate       func(ctx context.Context, obj T) field.ErrorList
	validateCreate func(ctx context.Context, obj T) field.ErrorList
	validateUpdate func(ctx context.Context, obj, old T) field.ErrorList
}

var _ registry.Strategy = strategy[runtime.Object]{}

func (s strategy[T]) Default(obj runtime.Object) {
	if t, ok := obj.(T); ok && s.defaults != nil {
		s.defaults(t)
	}
}

func (s strategy[T]) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if t, ok := obj.(T); ok && s.prepareCreate != nil {
		s.prepareCreate(ctx, t)
	}
}

func (s strategy[T]) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	t, ok1 := obj.(T)
	o, ok2 := old.(T)
	if ok1 && ok2 && s.prepareUpdate != nil {
		s.prepareUpdate(ctx, t, o)
	}
}

func (s strategy[T]) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	t, ok := obj.(T)
	if !ok {
		return field.ErrorList{wrongType(obj)}
	}
	var errs field.ErrorList
	if s.validate != nil {
		errs = append(errs, s.validate(ctx, t)...)
	}
	if s.validateCreate != nil {
		errs = append(errs, s.validateCreate(ctx, t)...)
	}
	return errs
}

// ValidateUpdate validates the new object as on create, then the update rules.
func (s strategy[T]) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	t, o, err := both[T](obj, old)
	if err != nil {
		return field.ErrorList{err}
	}
	var errs field.ErrorList
	if s.validate != nil {
		errs = append(errs, s.validate(ctx, t)...)
	}
	if s.validateUpdate != nil {
		errs = append(errs, s.validateUpdate(ctx, t, o)...)
	}
	return errs
}

// statusStrategy is a strategy whose status writes are checked by validateStatus
// alone (see registry.StatusStrategy).
type statusStrategy[T runtime.Object] struct {
	strategy[T]
	validateStatus func(ctx context.Context, obj, old T) field.ErrorList
}

var _ registry.StatusStrategy = statusStrategy[runtime.Object]{}

func (s statusStrategy[T]) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	t, o, err := both[T](obj, old)
	if err != nil {
		return field.ErrorList{err}
	}
	return s.validateStatus(ctx, t, o)
}

// both returns an update's new and old objects as T, or the error of the first that
// is not one.
func both[T runtime.Object](obj, old runtime.Object) (T, T, *field.Error) {
	var zero T
	t, ok := obj.(T)
	if !ok {
		return zero, zero, wrongType(obj)
	}
	o, ok := old.(T)
	if !ok {
		return zero, zero, wrongType(old)
	}
	return t, o, nil
}

func wrongType(obj runtime.Object) *field.Error {
	return field.InternalError(nil, fmt.Errorf("unexpected object type %T", obj))
}
