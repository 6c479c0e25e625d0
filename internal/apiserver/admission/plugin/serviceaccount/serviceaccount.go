// Package serviceaccount is upstream's ServiceAccount admission plugin for pods: the
// service account defaults to "default" and must exist, and unless the pod or its
// account opts out, every container gets the kube-api-access projected volume (a
// token, the cluster CA and the namespace) at the well-known path.
package serviceaccount

import (
	"context"
	"fmt"
	"path"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name for the plugin.
const PluginName = "ServiceAccount"

// Names the plugin uses, as upstream's.
const (
	defaultServiceAccount  = "default"
	serviceAccountMountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	apiAccessVolumePrefix  = "kube-api-access-"
	rootCAConfigMap        = "kube-root-ca.crt"
	mirrorPodAnnotation    = "kubernetes.io/config.mirror"
	// TokenExpirationSeconds is the lifetime of the projected token: upstream's 3607,
	// which the apiserver recognises to warn about (and extend) legacy token use.
	TokenExpirationSeconds = 3607
	// The "default" account may lag a new namespace (the controller-manager creates
	// it); a pod asking for it waits this long for it before being refused.
	defaultServiceAccountWait = 5 * time.Second
)

var serviceAccountsGVR = corev1.SchemeGroupVersion.WithResource("serviceaccounts")

// Plugin is the ServiceAccount admission plugin.
type Plugin struct {
	admission.Ops
	reader admission.Reader
}

// New returns the plugin reading service accounts through r.
func New(r admission.Reader) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create}, reader: r}
}

var _ admission.Mutator = (*Plugin)(nil)

// Admit defaults and checks a new pod's service account and mounts its token.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || a.Resource.Resource != "pods" || a.Subresource != "" {
		return nil
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		if pod.Spec.ServiceAccountName != "" {
			return admission.Forbiddenf(a, "a mirror pod may not reference service accounts")
		}
		return nil // the kubelet made it from a file; its spec is not ours to change
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = defaultServiceAccount
		pod.Spec.DeprecatedServiceAccount = defaultServiceAccount
	}
	sa, err := p.serviceAccount(ctx, a.Namespace, pod.Spec.ServiceAccountName)
	if apierrors.IsNotFound(err) {
		// Worded as upstream's, whose lister names the resource in the singular.
		err = fmt.Errorf("serviceaccount %q not found", pod.Spec.ServiceAccountName)
	}
	if err != nil {
		return admission.Forbiddenf(a, "error looking up service account %s/%s: %v", a.Namespace, pod.Spec.ServiceAccountName, err)
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

// serviceAccount looks the account up, waiting a little for "default" to appear.
func (p *Plugin) serviceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	deadline := time.Now().Add(defaultServiceAccountWait)
	for {
		obj, err := p.reader.Get(ctx, serviceAccountsGVR, namespace, name)
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
	expiry := int64(TokenExpirationSeconds)
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
