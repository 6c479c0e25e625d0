package validname

import (
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateObjectMetaAccessor is apivalidation.ValidateObjectMetaAccessor, which every
// create and update runs on the object's metadata. Metadata that each of its checks
// accepts (nearly all a server sees) is accepted without its regular expressions; any
// other is handed to apimachinery, for its errors.
func ValidateObjectMetaAccessor(meta metav1.Object, namespaced bool, nameFn apivalidation.ValidateNameFunc, fldPath *field.Path) field.ErrorList {
	if objectMetaValid(meta, namespaced, nameFn) {
		return nil
	}
	return apivalidation.ValidateObjectMetaAccessor(meta, namespaced, nameFn, fldPath)
}

// objectMetaValid reports that apivalidation.ValidateObjectMetaAccessor finds nothing
// wrong with meta; false means it must be asked.
func objectMetaValid(meta metav1.Object, namespaced bool, nameFn apivalidation.ValidateNameFunc) bool {
	if gen := meta.GetGenerateName(); gen != "" && len(nameFn(gen, true)) != 0 {
		return false
	}
	if name := meta.GetName(); name == "" || len(nameFn(name, false)) != 0 {
		return false
	}
	// The namespace's check is apivalidation.ValidateNamespaceName: a DNS label.
	if ns := meta.GetNamespace(); namespaced != (ns != "") || (ns != "" && !isDNS1123Label(ns)) {
		return false
	}
	if meta.GetGeneration() < 0 {
		return false
	}
	if !labelsValid(meta.GetLabels()) {
		return false
	}
	if !annotationsValid(meta.GetAnnotations()) {
		return false
	}
	if refs := meta.GetOwnerReferences(); len(refs) != 0 && len(apivalidation.ValidateOwnerReferences(refs, nil)) != 0 {
		return false
	}
	for _, f := range meta.GetFinalizers() {
		if !isQualifiedName(f) {
			return false
		}
	}
	if mf := meta.GetManagedFields(); len(mf) != 0 && len(metav1validation.ValidateManagedFields(mf, nil)) != 0 {
		return false
	}
	return true
}

// annotationsValid reports that apivalidation.ValidateAnnotations accepts annotations:
// each key a qualified name once lowercased (a key that is one already is one
// lowercased), and their keys and values within the total size.
func annotationsValid(annotations map[string]string) bool {
	size := 0
	for k, v := range annotations {
		if !isQualifiedName(k) {
			return false
		}
		size += len(k) + len(v)
	}
	return size <= apivalidation.TotalAnnotationSizeLimitB
}
