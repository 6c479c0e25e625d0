package fake

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	utilexec "k8s.io/utils/exec"
)

// Client calls a Runtime in-process through the same interfaces the kubelet uses for a
// remote runtime (k8s.io/cri-api/pkg/apis RuntimeService and ImageManagerService), with
// the same error conventions as k8s.io/cri-client: gRPC status errors, a
// utilexec.CodeExitError for a non-zero ExecSync and one wrapping remote.ErrCommandTimedOut
// for an ExecSync that timed out. Unlike a remote runtime's, what
// ListPodSandbox and ListContainers return is the runtime's own (the same records on
// every call while a sandbox's or container's state is unchanged, sharing its
// metadata, labels and annotations): callers must treat them as read-only.
type Client struct{ r *Runtime }

var (
	_ cri.RuntimeService      = Client{}
	_ cri.ImageManagerService = Client{}
)

// Client returns an in-process client of the runtime.
func (r *Runtime) Client() Client { return Client{r: r} }

// Version implements cri.RuntimeVersioner.
func (c Client) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	return c.r.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion})
}

// CreateContainer implements cri.ContainerManager.
func (c Client) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := c.r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podSandboxID, Config: config, SandboxConfig: sandboxConfig})
	if err != nil {
		return "", err
	}
	return resp.ContainerId, nil
}

// StartContainer implements cri.ContainerManager.
func (c Client) StartContainer(ctx context.Context, containerID string) error {
	_, err := c.r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: containerID})
	return err
}

// StopContainer implements cri.ContainerManager.
func (c Client) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	_, err := c.r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: timeout})
	return err
}

// RemoveContainer implements cri.ContainerManager.
func (c Client) RemoveContainer(ctx context.Context, containerID string) error {
	_, err := c.r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID})
	return err
}

// ListContainers implements cri.ContainerManager.
func (c Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	resp, err := c.r.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.Containers, nil
}

// ContainerStatus implements cri.ContainerManager.
func (c Client) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	return c.r.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: verbose})
}

// UpdateContainerResources implements cri.ContainerManager.
func (c Client) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	_, err := c.r.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: containerID, Linux: resources.GetLinux()})
	return err
}

// ExecSync implements cri.ContainerManager.
func (c Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	resp, err := c.r.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: int64(timeout.Seconds())})
	if status.Code(err) == codes.DeadlineExceeded {
		return nil, nil, fmt.Errorf("%w: %q timed out after %s", remote.ErrCommandTimedOut, strings.Join(cmd, " "), timeout)
	}
	if err != nil {
		return nil, nil, err
	}
	if resp.ExitCode != 0 {
		return resp.Stdout, resp.Stderr, utilexec.CodeExitError{
			Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), resp.ExitCode, resp.Stderr),
			Code: int(resp.ExitCode),
		}
	}
	return resp.Stdout, resp.Stderr, nil
}

func unimplemented(method string) error {
	return status.Errorf(codes.Unimplemented, "fake runtime does not implement %s", method)
}

// Exec implements cri.ContainerManager; the fake has no streaming server.
func (c Client) Exec(context.Context, *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return nil, unimplemented("Exec")
}

// Attach implements cri.ContainerManager; the fake has no streaming server.
func (c Client) Attach(context.Context, *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, unimplemented("Attach")
}

// ReopenContainerLog implements cri.ContainerManager.
func (c Client) ReopenContainerLog(ctx context.Context, containerID string) error {
	_, err := c.r.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: containerID})
	return err
}

// CheckpointContainer implements cri.ContainerManager; unsupported by the fake.
func (c Client) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) error {
	return unimplemented("CheckpointContainer")
}

// GetContainerEvents implements cri.ContainerManager; the fake has no event stream, so
// the kubelet relists instead.
func (c Client) GetContainerEvents(context.Context, chan *runtimeapi.ContainerEventResponse, func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	return unimplemented("GetContainerEvents")
}

// RunPodSandbox implements cri.PodSandboxManager.
func (c Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	resp, err := c.r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	if err != nil {
		return "", err
	}
	return resp.PodSandboxId, nil
}

// StopPodSandbox implements cri.PodSandboxManager.
func (c Client) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	_, err := c.r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID})
	return err
}

// RemovePodSandbox implements cri.PodSandboxManager.
func (c Client) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	_, err := c.r.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID})
	return err
}

// PodSandboxStatus implements cri.PodSandboxManager.
func (c Client) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	return c.r.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID, Verbose: verbose})
}

// ListPodSandbox implements cri.PodSandboxManager.
func (c Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	resp, err := c.r.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.Items, nil
}

// PortForward implements cri.PodSandboxManager; the fake has no streaming server.
func (c Client) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, unimplemented("PortForward")
}

// UpdatePodSandboxResources implements cri.PodSandboxManager.
func (c Client) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return c.r.UpdatePodSandboxResources(ctx, req)
}

// CheckpointPod implements cri.PodSandboxManager; unsupported by the fake.
func (c Client) CheckpointPod(context.Context, *runtimeapi.CheckpointPodRequest) error {
	return unimplemented("CheckpointPod")
}

// RestorePod implements cri.PodSandboxManager; unsupported by the fake.
func (c Client) RestorePod(context.Context, *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return nil, unimplemented("RestorePod")
}

// ContainerStats implements cri.ContainerStatsManager.
func (c Client) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	resp, err := c.r.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: containerID})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// ListContainerStats implements cri.ContainerStatsManager.
func (c Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	resp, err := c.r.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// PodSandboxStats implements cri.ContainerStatsManager.
func (c Client) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	resp, err := c.r.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: podSandboxID})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// ListPodSandboxStats implements cri.ContainerStatsManager.
func (c Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	resp, err := c.r.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// ListMetricDescriptors implements cri.ContainerStatsManager.
func (c Client) ListMetricDescriptors(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	resp, err := c.r.ListMetricDescriptors(ctx, &runtimeapi.ListMetricDescriptorsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Descriptors, nil
}

// ListPodSandboxMetrics implements cri.ContainerStatsManager.
func (c Client) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	resp, err := c.r.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.PodMetrics, nil
}

// UpdateRuntimeConfig implements cri.RuntimeService.
func (c Client) UpdateRuntimeConfig(ctx context.Context, runtimeConfig *runtimeapi.RuntimeConfig) error {
	_, err := c.r.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: runtimeConfig})
	return err
}

// Status implements cri.RuntimeService.
func (c Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	return c.r.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
}

// RuntimeConfig implements cri.RuntimeService.
func (c Client) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	return c.r.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
}

// Close implements cri.RuntimeService and cri.ImageManagerService; nothing to release.
func (c Client) Close(context.Context) error { return nil }

// ListImages implements cri.ImageManagerService.
func (c Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	resp, err := c.r.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.Images, nil
}

// ImageStatus implements cri.ImageManagerService.
func (c Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	return c.r.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
}

// PullImage implements cri.ImageManagerService.
func (c Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := c.r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: podSandboxConfig})
	if err != nil {
		return "", err
	}
	return resp.ImageRef, nil
}

// RemoveImage implements cri.ImageManagerService.
func (c Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	_, err := c.r.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
	return err
}

// ImageFsInfo implements cri.ImageManagerService.
func (c Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return c.r.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
}
