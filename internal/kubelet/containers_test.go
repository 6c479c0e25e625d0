package kubelet

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A pod's fsGroup reaches every container's processes as a supplemental group, ahead of
// the pod's own supplementalGroups, as upstream's kubelet gives it: without it a
// container running as a non-root user could not use the volumes the fsGroup owns.
func TestContainerSecurityContextCarriesFSGroup(t *testing.T) {
	c := &v1.Container{Name: "c"}
	for _, tc := range []struct {
		name string
		psc  *v1.PodSecurityContext
		want []int64
	}{
		{"none", nil, nil},
		{"supplemental only", &v1.PodSecurityContext{SupplementalGroups: []int64{5, 6}}, []int64{5, 6}},
		{"fsGroup only", &v1.PodSecurityContext{FSGroup: ptr.To[int64](2345)}, []int64{2345}},
		{"both", &v1.PodSecurityContext{FSGroup: ptr.To[int64](2345), SupplementalGroups: []int64{5, 6}}, []int64{2345, 5, 6}},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: tc.psc, Containers: []v1.Container{*c}}}
		got := containerSecurityContext(pod, c).GetSupplementalGroups()
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: supplemental groups %v, want %v", tc.name, got, tc.want)
		}
	}
}
