package core

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/validname"
)

func limitRangesResource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "limitranges",
		Kind:         "LimitRange",
		SingularName: "limitrange",
		Namespaced:   true,
		ShortNames:   []string{"limits"},
		New:          func() runtime.Object { return &corev1.LimitRange{} },
		NewList:      func() runtime.Object { return &corev1.LimitRangeList{} },
		Strategy: strategy[*corev1.LimitRange]{
			defaults: defaultLimitRange,
			validate: validateLimitRange,
		},
		// Upstream has no printer for limit ranges: the generic one prints the
		// creation time as an RFC 3339 date ("CREATED AT"), not an age.
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Created At", Type: "date", Description: registry.AgeColumn.Description},
		}, func(lr *corev1.LimitRange) []interface{} {
			return []interface{}{lr.Name, lr.CreationTimestamp.UTC().Format(time.RFC3339)}
		}),
	}
}

// defaultLimitRange fills a container item's default limit from max, and its
// default request from the default limit, then from min.
func defaultLimitRange(lr *corev1.LimitRange) {
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		for _, rl := range []corev1.ResourceList{item.Max, item.Min, item.Default, item.DefaultRequest, item.MaxLimitRequestRatio} {
			roundResourceList(rl)
		}
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		if item.Default == nil {
			item.Default = corev1.ResourceList{}
		}
		if item.DefaultRequest == nil {
			item.DefaultRequest = corev1.ResourceList{}
		}
		fill := func(dst, src corev1.ResourceList) {
			for k, v := range src {
				if _, ok := dst[k]; !ok {
					dst[k] = v.DeepCopy()
				}
			}
		}
		fill(item.Default, item.Max)
		fill(item.DefaultRequest, item.Default)
		fill(item.DefaultRequest, item.Min)
	}
}

var standardLimitTypes = sets.New(string(corev1.LimitTypePod), string(corev1.LimitTypeContainer), string(corev1.LimitTypePersistentVolumeClaim))

func validateLimitRange(_ context.Context, lr *corev1.LimitRange) field.ErrorList {
	var errs field.ErrorList
	limitsPath := field.NewPath("spec", "limits")
	types := sets.New[corev1.LimitType]()
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		idxPath := limitsPath.Index(i)
		typePath := idxPath.Child("type")
		for _, msg := range validname.IsQualifiedName(string(item.Type)) {
			errs = append(errs, field.Invalid(typePath, item.Type, msg))
		}
		if !strings.Contains(string(item.Type), "/") && !standardLimitTypes.Has(string(item.Type)) {
			errs = append(errs, field.Invalid(typePath, item.Type, "must be a standard limit type or fully qualified"))
		}
		if types.Has(item.Type) {
			errs = append(errs, field.Duplicate(typePath, item.Type))
		}
		types.Insert(item.Type)
		if item.Type == corev1.LimitTypePod {
			if len(item.Default) > 0 {
				errs = append(errs, field.Forbidden(idxPath.Child("default"), "may not be specified when `type` is 'Pod'"))
			}
			if len(item.DefaultRequest) > 0 {
				errs = append(errs, field.Forbidden(idxPath.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
			}
		}

		lists := []struct {
			name string
			rl   corev1.ResourceList
		}{{"max", item.Max}, {"min", item.Min}, {"default", item.Default}, {"defaultRequest", item.DefaultRequest}, {"maxLimitRequestRatio", item.MaxLimitRequestRatio}}
		keys := sets.New[corev1.ResourceName]()
		for _, l := range lists {
			for _, name := range sortedResourceNames(l.rl) {
				keys.Insert(name)
				errs = append(errs, validateNonNegativeQuantity(l.rl[name], idxPath.Child(l.name).Key(string(name)))...)
			}
		}
		for _, k := range sets.List(keys) {
			key := string(k)
			min, hasMin := item.Min[k]
			max, hasMax := item.Max[k]
			def, hasDef := item.Default[k]
			req, hasReq := item.DefaultRequest[k]
			ratio, hasRatio := item.MaxLimitRequestRatio[k]
			greater := func(a, b resource.Quantity) bool { return a.Cmp(b) > 0 }
			if hasMin && hasMax && greater(min, max) {
				errs = append(errs, field.Invalid(idxPath.Child("min").Key(key), min.String(), fmt.Sprintf("min value %s is greater than max value %s", min.String(), max.String())))
			}
			if hasReq && hasMin && greater(min, req) {
				errs = append(errs, field.Invalid(idxPath.Child("defaultRequest").Key(key), req.String(), fmt.Sprintf("min value %s is greater than default request value %s", min.String(), req.String())))
			}
			if hasReq && hasMax && greater(req, max) {
				errs = append(errs, field.Invalid(idxPath.Child("defaultRequest").Key(key), req.String(), fmt.Sprintf("default request value %s is greater than max value %s", req.String(), max.String())))
			}
			if hasReq && hasDef && greater(req, def) {
				errs = append(errs, field.Invalid(idxPath.Child("defaultRequest").Key(key), req.String(), fmt.Sprintf("default request value %s is greater than default limit value %s", req.String(), def.String())))
			}
			if hasDef && hasMin && greater(min, def) {
				errs = append(errs, field.Invalid(idxPath.Child("default").Key(key), min.String(), fmt.Sprintf("min value %s is greater than default value %s", min.String(), def.String())))
			}
			if hasDef && hasMax && greater(def, max) {
				errs = append(errs, field.Invalid(idxPath.Child("default").Key(key), max.String(), fmt.Sprintf("default value %s is greater than max value %s", def.String(), max.String())))
			}
			if hasRatio && ratio.Cmp(resource.MustParse("1")) < 0 {
				errs = append(errs, field.Invalid(idxPath.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is less than 1", ratio.String())))
			}
		}
	}
	return errs
}
