package kubelet

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Every place a pod names a ConfigMap or Secret the kubelet reads is registered for a
// watch; a place left out would be read by a GET on every sync instead.
func TestPodObjectNames(t *testing.T) {
	ref := func(n string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: n} }
	pod := &v1.Pod{Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{ref("pull")},
		Volumes: []v1.Volume{
			{VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("cm-vol")}}},
			{VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "secret-vol"}}},
			{VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: ref("kube-root-ca.crt")}},
				{Secret: &v1.SecretProjection{LocalObjectReference: ref("secret-proj")}},
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
			}}}},
		},
		InitContainers: []v1.Container{{EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("cm-init")}}}}},
		Containers: []v1.Container{{Env: []v1.EnvVar{
			{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("cm-env"), Key: "k"}}},
			{Name: "B", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("secret-env"), Key: "k"}}},
		}}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
			EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: ref("secret-debug")}}}}}},
	}}
	cms, secrets := podObjectNames(pod)
	slices.Sort(cms)
	slices.Sort(secrets)
	if want := []string{"cm-env", "cm-init", "cm-vol", "kube-root-ca.crt"}; !slices.Equal(cms, want) {
		t.Errorf("configmaps %v, want %v", cms, want)
	}
	if want := []string{"pull", "secret-debug", "secret-env", "secret-proj", "secret-vol"}; !slices.Equal(secrets, want) {
		t.Errorf("secrets %v, want %v", secrets, want)
	}
}
