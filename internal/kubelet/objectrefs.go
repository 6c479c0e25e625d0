package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/kubelet/watchedobjects"
)

// newConfigMapManager follows the ConfigMaps the node's pods read (volumes, projected
// sources, env and envFrom), one watch each, as upstream's kubelet does by default
// (configMapAndSecretChangeDetectionStrategy: Watch). changed gets the pods that refer
// to one that changed.
func newConfigMapManager(client kubernetes.Interface, changed func([]types.UID)) *watchedobjects.Manager {
	return watchedobjects.New(watchedobjects.Options{
		Resource:     v1.Resource("configmaps"),
		ExpectedType: &v1.ConfigMap{},
		ListWatch: watchedobjects.ListWatch{
			Client: client,
			List: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
				return client.CoreV1().ConfigMaps(ns).List(ctx, o)
			},
			Watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
				return client.CoreV1().ConfigMaps(ns).Watch(ctx, o)
			},
		},
		Refs:    podConfigMapNames,
		Changed: changed,
		Immutable: func(obj runtime.Object) bool {
			cm, ok := obj.(*v1.ConfigMap)
			return ok && cm.Immutable != nil && *cm.Immutable
		},
	})
}

// newSecretManager is newConfigMapManager's counterpart for Secrets (volumes,
// projected sources, env, envFrom and image pull secrets).
func newSecretManager(client kubernetes.Interface, changed func([]types.UID)) *watchedobjects.Manager {
	return watchedobjects.New(watchedobjects.Options{
		Resource:     v1.Resource("secrets"),
		ExpectedType: &v1.Secret{},
		ListWatch: watchedobjects.ListWatch{
			Client: client,
			List: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
				return client.CoreV1().Secrets(ns).List(ctx, o)
			},
			Watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
				return client.CoreV1().Secrets(ns).Watch(ctx, o)
			},
		},
		Refs:    podSecretNames,
		Changed: changed,
		Immutable: func(obj runtime.Object) bool {
			s, ok := obj.(*v1.Secret)
			return ok && s.Immutable != nil && *s.Immutable
		},
	})
}

// podContainers is every container of the pod: init, regular and ephemeral.
func podContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		out = append(out, (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return out
}

// podConfigMapNames names the ConfigMaps the kubelet reads for the pod.
func podConfigMapNames(pod *v1.Pod) []string { cms, _ := podObjectNames(pod); return cms }

// podSecretNames names the Secrets the kubelet reads for the pod.
func podSecretNames(pod *v1.Pod) []string { _, secrets := podObjectNames(pod); return secrets }

// podObjectNames names the ConfigMaps and Secrets the kubelet reads for the pod:
// volumes and their projected sources, env and envFrom of every container, and (for
// Secrets) image pull secrets.
func podObjectNames(pod *v1.Pod) (configMaps, secrets []string) {
	for _, s := range pod.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			configMaps = append(configMaps, v.ConfigMap.Name)
		case v.Secret != nil:
			secrets = append(secrets, v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					configMaps = append(configMaps, s.ConfigMap.Name)
				}
				if s.Secret != nil {
					secrets = append(secrets, s.Secret.Name)
				}
			}
		}
	}
	for _, c := range podContainers(pod) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				configMaps = append(configMaps, e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				secrets = append(secrets, e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				configMaps = append(configMaps, e.ValueFrom.ConfigMapKeyRef.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				secrets = append(secrets, e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	return configMaps, secrets
}
