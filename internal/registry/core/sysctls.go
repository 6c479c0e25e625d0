package core

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Sysctl names as upstream accepts them: dot- or slash-separated segments of lower-case
// alphanumerics, '-' and '_', at most 253 characters.
const (
	sysctlSegmentFmt   = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
	sysctlNameFmt      = "(" + sysctlSegmentFmt + "[\\./])*" + sysctlSegmentFmt
	sysctlMaxLength    = 253
	sysctlNameErrorMsg = "must have at most %d characters and match regex %s"
)

var sysctlName = regexp.MustCompile("^" + sysctlNameFmt + "$")

// validateSysctls checks spec.securityContext.sysctls: valid, distinct names.
func validateSysctls(sc *corev1.PodSecurityContext, fldPath *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, s := range sc.Sysctls {
		namePath := fldPath.Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlName.MatchString(s.Name):
			errs = append(errs, field.Invalid(namePath, s.Name, fmt.Sprintf(sysctlNameErrorMsg, sysctlMaxLength, sysctlNameFmt)))
		case seen.Has(s.Name):
			errs = append(errs, field.Duplicate(namePath, s.Name))
		}
		seen.Insert(s.Name)
	}
	return errs
}
