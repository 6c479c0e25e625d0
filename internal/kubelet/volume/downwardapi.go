package volume

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// downwardAPIPayload is the files of a downwardAPI volume or projection: pod metadata
// fields and container resources.
func (m *Manager) downwardAPIPayload(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, defMode *int32) (payload, error) {
	p := payload{}
	for _, it := range items {
		var value string
		switch {
		case it.FieldRef != nil:
			v, err := MetadataField(pod, it.FieldRef.FieldPath)
			if err != nil {
				return nil, err
			}
			value = v
		case it.ResourceFieldRef != nil:
			v, err := m.opts.Sources.ResourceValue(pod, it.ResourceFieldRef)
			if err != nil {
				return nil, err
			}
			value = v
		default:
			return nil, fmt.Errorf("downwardAPI item %q has no source", it.Path)
		}
		p[it.Path] = file{data: []byte(value), mode: fileMode(it.Mode, defMode)}
	}
	return p, nil
}

// MetadataField resolves the metadata field paths of the downward API: those a
// downwardAPI volume may name, and the metadata ones of an env fieldRef. Whole label and
// annotation maps are one key="value" line per entry, sorted, as upstream writes.
func MetadataField(pod *v1.Pod, path string) (string, error) {
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", path)
}

func formatMap(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// subscript parses "prefix['key']".
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}
