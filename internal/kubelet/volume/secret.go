package volume

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// secretPayload is configMapPayload for a Secret.
func (m *Manager) secretPayload(ctx context.Context, ns, name string, items []v1.KeyToPath, defMode *int32, optional *bool) (payload, error) {
	s, err := m.opts.Sources.Secret(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		if isTrue(optional) {
			return payload{}, nil
		}
		return nil, fmt.Errorf("secret %q not found", name)
	}
	if err != nil {
		return nil, err
	}
	data := make(map[string][]byte, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		data[k] = v
	}
	return project(data, items, defMode, isTrue(optional), "references non-existent secret key: %s")
}
