package volume

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// configMapPayload is the files a configMap volume (or projection) shows: every key of
// data and binaryData, or only the items listed, at their paths. A missing ConfigMap
// or key is an error unless optional, as upstream words it.
func (m *Manager) configMapPayload(ctx context.Context, ns, name string, items []v1.KeyToPath, defMode *int32, optional *bool) (payload, error) {
	cm, err := m.opts.Sources.ConfigMap(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		if isTrue(optional) {
			return payload{}, nil
		}
		return nil, fmt.Errorf("configmap %q not found", name)
	}
	if err != nil {
		return nil, err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return project(data, items, defMode, isTrue(optional), "configmap references non-existent config key: %s")
}

// project selects the files of a key/value source. Modes here are before fsGroup,
// which the caller adds.
func project(data map[string][]byte, items []v1.KeyToPath, defMode *int32, optional bool, missingKey string) (payload, error) {
	p := payload{}
	if len(items) == 0 {
		for k, v := range data {
			p[k] = file{data: v, mode: fileMode(nil, defMode)}
		}
		return p, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf(missingKey, it.Key)
		}
		p[it.Path] = file{data: v, mode: fileMode(it.Mode, defMode)}
	}
	return p, nil
}

func isTrue(b *bool) bool { return b != nil && *b }
