package core

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateSysctls(t *testing.T) {
	sc := &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{
		{Name: "foo-", Value: "bar"}, {Name: "kernel.shmmax", Value: "1"}, {Name: "safe-and-unsafe", Value: "1"},
		{Name: "bar..", Value: "42"}, {Name: "net/ipv4/ip_forward", Value: "1"}, {Name: "kernel.shmmax", Value: "2"},
	}}
	errs := validateSysctls(sc, field.NewPath("spec", "securityContext", "sysctls"))
	got := errs.ToAggregate().Error()
	for _, want := range []string{`sysctls[0].name: Invalid value: "foo-"`, `sysctls[3].name: Invalid value: "bar.."`, `sysctls[5].name: Duplicate value: "kernel.shmmax"`} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q: %s", want, got)
		}
	}
	if len(errs) != 3 || strings.Contains(got, "safe-and-unsafe") || strings.Contains(got, "ip_forward") {
		t.Errorf("errors: %s", got)
	}
}
