package kubelet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runtimeHandler returns the CRI runtime handler of the pod's RuntimeClass ("" for the
// runtime's default when the pod names none). A class that does not exist (deleted
// after the pod was admitted) is an error, as upstream's kubelet reports it, so that
// the pod waits with a FailedCreatePodSandBox event instead of running on the default.
func (kl *Kubelet) runtimeHandler(ctx context.Context, pod *v1.Pod) (string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" {
		return "", nil
	}
	obj, err := kl.volumeSources.objects.get("runtimeclasses/"+*name, func() (any, error) {
		return kl.client.NodeV1().RuntimeClasses().Get(ctx, *name, metav1.GetOptions{})
	})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("RuntimeClass %q not found", *name)
	}
	if err != nil {
		return "", fmt.Errorf("reading RuntimeClass %q: %w", *name, err)
	}
	return obj.(*nodev1.RuntimeClass).Handler, nil
}
