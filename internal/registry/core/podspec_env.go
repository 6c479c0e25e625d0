package core

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry/validname"
)

// Environment variables of a container: literal values, downward API fields,
// resource fields and config map or secret keys.

func validateEnv(env []corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		idxPath := fldPath.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(idxPath.Child("name"), e.Name, msg))
			}
		}
		errs = append(errs, validateEnvValueFrom(e, idxPath.Child("valueFrom"))...)
	}
	return errs
}

// envFieldPaths are the pod fields an environment variable may read.
var envFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
	"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}

// envResourceFields are the container resources an environment variable may read.
var envResourceFields = []string{"limits.cpu", "limits.ephemeral-storage", "limits.memory",
	"requests.cpu", "requests.ephemeral-storage", "requests.memory"}

func validateEnvValueFrom(e corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	vf := e.ValueFrom
	if vf == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if vf.FieldRef != nil {
		n++
		errs = append(errs, validateEnvFieldRef(vf.FieldRef, fldPath.Child("fieldRef"))...)
	}
	if vf.ResourceFieldRef != nil {
		n++
		p := fldPath.Child("resourceFieldRef")
		r := vf.ResourceFieldRef.Resource
		switch {
		case r == "":
			errs = append(errs, field.Required(p.Child("resource"), ""))
		case !slices.Contains(envResourceFields, r) && !strings.HasPrefix(r, "requests.hugepages-") && !strings.HasPrefix(r, "limits.hugepages-"):
			errs = append(errs, field.NotSupported(p.Child("resource"), r, envResourceFields))
		}
	}
	if vf.ConfigMapKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if vf.SecretKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(vf.SecretKeyRef.Name, vf.SecretKeyRef.Key, fldPath.Child("secretKeyRef"))...)
	}
	if vf.FileKeyRef != nil {
		n++
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case e.Value != "":
		errs = append(errs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	case n > 1:
		errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	return errs
}

func validateEnvFieldRef(ref *corev1.ObjectFieldSelector, fldPath *field.Path) field.ErrorList {
	if ref.APIVersion == "" {
		return field.ErrorList{field.Required(fldPath.Child("apiVersion"), "")}
	}
	if ref.FieldPath == "" {
		return field.ErrorList{field.Required(fldPath.Child("fieldPath"), "")}
	}
	if ref.APIVersion != "v1" {
		return field.ErrorList{field.Invalid(fldPath.Child("fieldPath"), ref.FieldPath,
			fmt.Sprintf("error converting fieldPath: unsupported pod version: %s", ref.APIVersion))}
	}
	path, subscript, subscripted := splitSubscript(ref.FieldPath)
	if !subscripted {
		if !slices.Contains(envFieldPaths, path) {
			return field.ErrorList{field.NotSupported(fldPath.Child("fieldPath"), path, envFieldPaths)}
		}
		return nil
	}
	switch path {
	case "metadata.annotations":
		return validname.ValidateLabelName(strings.ToLower(subscript), fldPath)
	case "metadata.labels":
		return validname.ValidateLabelName(subscript, fldPath)
	}
	return field.ErrorList{field.Invalid(fldPath, path, "does not support subscript")}
}

// splitSubscript splits "metadata.labels['app']" into its path and key.
func splitSubscript(fieldPath string) (path, subscript string, ok bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	open := strings.Index(fieldPath, "['")
	if open < 0 {
		return fieldPath, "", false
	}
	return fieldPath[:open], fieldPath[open+2 : len(fieldPath)-2], true
}

// validateKeySelector checks a config map or secret key reference.
func validateKeySelector(name, key string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validname.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fldPath.Child("name"), name, msg))
	}
	if key == "" {
		return append(errs, field.Required(fldPath.Child("key"), ""))
	}
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(fldPath.Child("key"), key, msg))
	}
	return errs
}

func validateEnvFrom(sources []corev1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, src := range sources {
		idxPath := fldPath.Index(i)
		if src.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(src.Prefix) {
				errs = append(errs, field.Invalid(idxPath.Child("prefix"), src.Prefix, msg))
			}
		}
		n := 0
		check := func(name string, p *field.Path) {
			n++
			if name == "" {
				errs = append(errs, field.Required(p.Child("name"), ""))
				return
			}
			for _, msg := range validname.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(p.Child("name"), name, msg))
			}
		}
		if src.ConfigMapRef != nil {
			check(src.ConfigMapRef.Name, idxPath.Child("configMapRef"))
		}
		if src.SecretRef != nil {
			check(src.SecretRef.Name, idxPath.Child("secretRef"))
		}
		switch {
		case n == 0:
			errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `configMapRef` or `secretRef`"))
		case n > 1:
			errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}
