package core

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// maxDataSize bounds the summed values of a ConfigMap or Secret, as upstream does.
const maxDataSize = 1 << 20

const immutableDetail = "field is immutable when `immutable` is set"

func configMapsResource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "configmaps",
		Kind:         "ConfigMap",
		SingularName: "configmap",
		Namespaced:   true,
		ShortNames:   []string{"cm"},
		New:          func() runtime.Object { return &corev1.ConfigMap{} },
		NewList:      func() runtime.Object { return &corev1.ConfigMapList{} },
		Strategy: strategy[*corev1.ConfigMap]{
			validate:       validateConfigMap,
			validateUpdate: validateConfigMapUpdate,
		},
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Data", "string", corev1.ConfigMap{}.SwaggerDoc()["data"]),
			registry.AgeColumn,
		}, func(cm *corev1.ConfigMap) []interface{} {
			return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), registry.Age(cm.CreationTimestamp)}
		}),
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func validateConfigMap(_ context.Context, cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	size := 0
	dataPath, binaryPath := field.NewPath("data"), field.NewPath("binaryData")
	for _, k := range sortedKeys(cm.Data) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(dataPath.Key(k), k, msg))
		}
		if _, dup := cm.BinaryData[k]; dup {
			errs = append(errs, field.Invalid(dataPath.Key(k), k, "duplicate of key present in binaryData"))
		}
		size += len(cm.Data[k])
	}
	for _, k := range sortedKeys(cm.BinaryData) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(binaryPath.Key(k), k, msg))
		}
		size += len(cm.BinaryData[k])
	}
	if size > maxDataSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxDataSize))
	}
	return errs
}

// validateConfigMapUpdate freezes data once the config map is immutable.
func validateConfigMapUpdate(_ context.Context, cm, old *corev1.ConfigMap) field.ErrorList {
	if old.Immutable == nil || !*old.Immutable {
		return nil
	}
	var errs field.ErrorList
	if cm.Immutable == nil || !*cm.Immutable {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableDetail))
	}
	if !sameStringMap(cm.Data, old.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), immutableDetail))
	}
	if !sameBytesMap(cm.BinaryData, old.BinaryData) {
		errs = append(errs, field.Forbidden(field.NewPath("binaryData"), immutableDetail))
	}
	return errs
}

func sameStringMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func sameBytesMap(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || string(w) != string(v) {
			return false
		}
	}
	return true
}
