package apiserver

import (
	"context"
	"fmt"
	"path"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

// Names the ServiceAccount admission plugin uses, as upstream's.
const (
	defaultServiceAccount  = "default"
	serviceAccountMountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	apiAccessVolumePrefix  = "kube-api-access-"
	rootCAConfigMap        = "kube-root-ca.crt"
	mirrorPodAnnotation    = "kubernetes.io/config.mirror"
	// The "default" account may lag a new namespace (the controller-manager creates
	// it); a pod asking for it waits this long for it before being refused.
	defaultServiceAccountWait = 5 * time.Second
)

// serviceAccountAdmission is upstream's ServiceAccount admission plugin for pods: the
// service account defaults to "default" and must exist, and unless the pod or its
// account opts out, every container gets the kube-api-access projected volume (a
// token, the cluster CA and the namespace) at the well-known path.
type serviceAccountAdmission struct{ s *Server }

func (a *serviceAccountAdmission) Admit(ctx context.Context, operation, resource, namespace string, obj, _ runtime.Object) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok || resource != "pods" || operation != "create" {
		return nil
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		if pod.Spec.ServiceAccountName != "" {
			return forbiddenPod(pod, "a mirror pod may not reference service accounts")
		}
		return nil // the kubelet made it from a file; its spec is not ours to change
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = defaultServiceAccount
		pod.Spec.DeprecatedServiceAccount = defaultServiceAccount
	}
	sa, err := a.serviceAccount(ctx, namespace, pod.Spec.ServiceAccountName)
	if apierrors.IsNotFound(err) {
		// Worded as upstream's, whose lister names the resource in the singular.
		err = fmt.Errorf("serviceaccount %q not found", pod.Spec.ServiceAccountName)
	}
	if err != nil {
		return forbiddenPod(pod, fmt.Sprintf("error looking up service account %s/%s: %v", namespace, pod.Spec.ServiceAccountName, err))
	}
	if !automount(pod, sa) || mountsTokenPath(pod) {
		return nil
	}
	name := apiAccessVolumePrefix + utilrand.String(5)
	pod.Spec.Volumes = append(pod.Spec.Volumes, apiAccessVolume(name))
	mount := corev1.VolumeMount{Name: name, MountPath: serviceAccountMountDir, ReadOnly: true}
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].VolumeMounts = append(pod.Spec.InitContainers[i].VolumeMounts, mount)
	}
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].VolumeMounts = append(pod.Spec.Containers[i].VolumeMounts, mount)
	}
	return nil
}

func forbiddenPod(pod *corev1.Pod, msg string) error {
	return apierrors.NewForbidden(podsGVR.GroupResource(), pod.Name, fmt.Errorf("%s", msg))
}

// serviceAccount looks the account up, waiting a little for "default" to appear.
func (a *serviceAccountAdmission) serviceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	deadline := time.Now().Add(defaultServiceAccountWait)
	for {
		obj, err := a.s.cachedObject(ctx, serviceAccountsGVR, namespace, name)
		if err == nil {
			return obj.(*corev1.ServiceAccount), nil
		}
		if !apierrors.IsNotFound(err) || name != defaultServiceAccount || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// automount applies the pod's automountServiceAccountToken, else its account's.
func automount(pod *corev1.Pod, sa *corev1.ServiceAccount) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	return sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken
}

// mountsTokenPath reports whether a container already mounts something at the token
// directory, in which case upstream leaves the pod alone.
func mountsTokenPath(pod *corev1.Pod) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, m := range c.VolumeMounts {
				if path.Clean(m.MountPath) == serviceAccountMountDir {
					return true
				}
			}
		}
	}
	return false
}

func apiAccessVolume(name string) corev1.Volume {
	expiry := int64(legacyWarnTokenSeconds)
	mode := int32(corev1.ProjectedVolumeSourceDefaultMode)
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiry, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}},
			}}},
		},
	}}}
}
