package containerd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	remote "k8s.io/cri-client/pkg"
)

// RemoveAllPods stops and removes every pod sandbox, and so every container, of the
// runtime at opts' socket. Pods outlive the kubelet and containerd by design (a
// restarted kubelet adopts them), so a test or benchmark that is done with a node calls
// this before stopping it; otherwise each pod's network namespace, mounts and veth stay
// behind on the host.
func RemoveAllPods(ctx context.Context, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(opts.Endpoint()).
		WithConnectionTimeout(10 * time.Second).Build(ctx)
	if err != nil {
		return fmt.Errorf("connecting to containerd: %w", err)
	}
	defer rs.Close(ctx)
	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, sb := range sandboxes {
		// NotFound: the kubelet removed it meanwhile.
		if err := rs.StopPodSandbox(ctx, sb.Id); err != nil && status.Code(err) != codes.NotFound {
			errs = append(errs, err)
			continue
		}
		if err := rs.RemovePodSandbox(ctx, sb.Id); err != nil && status.Code(err) != codes.NotFound {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
