package core

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/registry"
)

// column and wideColumn build printer columns; wide ones show only with -o wide.
func column(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: description}
}

func wideColumn(name, typ, description string) metav1.TableColumnDefinition {
	c := column(name, typ, description)
	c.Priority = 1
	return c
}

// printerFor adapts a typed row function to registry.Printer. An object of another
// type prints no cells.
func printerFor[T runtime.Object](columns []metav1.TableColumnDefinition, row func(T) []interface{}) *registry.Printer {
	return &registry.Printer{
		Columns: columns,
		Row: func(obj runtime.Object) []interface{} {
			t, ok := obj.(T)
			if !ok {
				return nil
			}
			return row(t)
		},
	}
}

// containerCells joins container names and images with commas, as the wide
// CONTAINERS and IMAGES columns show them.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	i := make([]string, len(containers))
	for k, c := range containers {
		n[k], i[k] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(i, ",")
}

// accessModesString abbreviates access modes in upstream's fixed order (RWO,ROX,RWX,RWOP).
func accessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	has := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range modes {
		has[m] = true
	}
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"},
	} {
		if has[m.mode] {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

// noneIfEmpty prints "<none>" for an empty cell, as upstream's printers do.
func noneIfEmpty(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
