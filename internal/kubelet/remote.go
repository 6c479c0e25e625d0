package kubelet

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// ConnectRuntime dials a CRI runtime's runtime and image services (imageEndpoint defaults
// to runtimeEndpoint), e.g. "unix:///run/containerd/containerd.sock". A runtime that
// is up but not serving CRI yet (containerd answers "server is not initialized yet"
// while its CRI plugin recovers the containers it had) is asked again until
// connectTimeout has passed, rather than failing the kubelet's start.
func ConnectRuntime(ctx context.Context, runtimeEndpoint, imageEndpoint string) (cri.RuntimeService, cri.ImageManagerService, error) {
	if imageEndpoint == "" {
		imageEndpoint = runtimeEndpoint
	}
	// The deadline bounds the attempts too: one attempt against a runtime that
	// never answers would otherwise take a whole connectTimeout of its own.
	attempts, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	for {
		rs, is, err := connectRuntimeOnce(attempts, runtimeEndpoint, imageEndpoint)
		if err == nil || attempts.Err() != nil {
			return rs, is, err
		}
		select {
		case <-attempts.Done():
			return nil, nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// connectTimeout bounds ConnectRuntime's attempts together, and each CRI call after.
const connectTimeout = 2 * time.Minute

func connectRuntimeOnce(ctx context.Context, runtimeEndpoint, imageEndpoint string) (cri.RuntimeService, cri.ImageManagerService, error) {
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(runtimeEndpoint).
		WithConnectionTimeout(connectTimeout).Build(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the container runtime: %w", err)
	}
	is, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(imageEndpoint).
		WithConnectionTimeout(connectTimeout).Build(ctx)
	if err != nil {
		_ = rs.Close(ctx)
		return nil, nil, fmt.Errorf("connecting to the image service: %w", err)
	}
	return rs, is, nil
}

// ParseTaints parses --register-with-taints values: "key=value:Effect" or "key:Effect",
// comma separated.
func ParseTaints(spec string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kv, effect, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("invalid taint %q: want key[=value]:Effect", item)
		}
		switch v1.TaintEffect(effect) {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("invalid taint %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", item)
		}
		key, value, _ := strings.Cut(kv, "=")
		if key == "" {
			return nil, fmt.Errorf("invalid taint %q: empty key", item)
		}
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}

// ParseLabels parses --node-labels: "k=v,k2=v2".
func ParseLabels(spec string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid label %q: want key=value", item)
		}
		out[k] = v
	}
	return out, nil
}
