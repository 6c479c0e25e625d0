package kubelet

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// checkHostUsers refuses the sandbox of a pod that asks for a user namespace of its own
// (spec.hostUsers: false), which mizzen's kubelet does not make: run in the node's user
// namespace instead, its root would be the host's root. The words are upstream's when
// the runtime cannot make one either (containerd before 2.0 reports no handler that
// can).
func (kl *Kubelet) checkHostUsers(ctx context.Context, pod *v1.Pod, handler string) error {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return nil
	}
	st, err := kl.runtime.Status(ctx, false)
	if err != nil {
		return fmt.Errorf("can't set `spec.hostUsers: false`, reading the runtime's features: %w", err)
	}
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() == handler && h.GetFeatures().GetUserNamespaces() {
			return errors.New("can't set `spec.hostUsers: false`: mizzen's kubelet does not make user namespaces yet")
		}
	}
	if handler != "" {
		return fmt.Errorf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
	}
	return errors.New("can't set `spec.hostUsers: false`, runtime does not support user namespaces")
}
