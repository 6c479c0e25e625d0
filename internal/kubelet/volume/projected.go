package volume

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// projectedPayload merges the files of every source of a projected volume; two
// sources writing one path is an error.
func (m *Manager) projectedPayload(ctx context.Context, pod *v1.Pod, volName string, src *v1.ProjectedVolumeSource) (payload, error) {
	out := payload{}
	merge := func(p payload) error {
		for path, f := range p {
			if _, dup := out[path]; dup {
				return fmt.Errorf("projected volume: conflicting paths %q", path)
			}
			out[path] = f
		}
		return nil
	}
	for i, s := range src.Sources {
		var p payload
		var err error
		switch {
		case s.ConfigMap != nil:
			p, err = m.configMapPayload(ctx, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, src.DefaultMode, s.ConfigMap.Optional)
		case s.Secret != nil:
			p, err = m.secretPayload(ctx, pod.Namespace, s.Secret.Name, s.Secret.Items, src.DefaultMode, s.Secret.Optional)
		case s.DownwardAPI != nil:
			p, err = m.downwardAPIPayload(pod, s.DownwardAPI.Items, src.DefaultMode)
		case s.ServiceAccountToken != nil:
			p, err = m.tokenPayload(ctx, pod, s.ServiceAccountToken, src.DefaultMode)
		case s.ClusterTrustBundle != nil:
			p, err = m.clusterTrustBundlePayload(ctx, s.ClusterTrustBundle, src.DefaultMode)
		case s.PodCertificate != nil:
			p, err = m.podCertificatePayload(ctx, pod, podCertKey{pod: pod.UID, volume: volName, source: i}, s.PodCertificate, src.DefaultMode)
		default:
			err = fmt.Errorf("projected volume source is not supported by this kubelet")
		}
		if err != nil {
			return nil, err
		}
		if err := merge(p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tokenPayload is the file of a serviceAccountToken projection: a token bound to the
// pod, reused until it is due a refresh. As upstream, the token is private (0600)
// when the pod has an fsGroup (which write then lets read: 0640) or when all its
// containers run as one user, who then owns it; otherwise it has the volume's mode.
func (m *Manager) tokenPayload(ctx context.Context, pod *v1.Pod, src *v1.ServiceAccountTokenProjection, defMode *int32) (payload, error) {
	exp := int64(3600)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	tok, err := m.tokens.get(ctx, pod, src.Audience, exp, m.opts.Sources)
	if err != nil {
		return nil, fmt.Errorf("failed to fetch token: %w", err)
	}
	f := file{data: []byte(tok), mode: fileMode(nil, defMode)}
	if uid := fsUser(pod); uid >= 0 {
		f.owner = &uid
		f.mode = 0o600
	}
	if fsGroup(pod) >= 0 {
		f.mode = 0o600
	}
	return payload{src.Path: f}, nil
}
