package plugins

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"

	"mizzen/internal/scheduler/framework"
)

// Thresholds as upstream: images below 23MB do not count, and the score saturates at
// 1000MB per container.
const (
	imageMinThreshold          int64 = 23 * 1024 * 1024
	imageMaxContainerThreshold int64 = 1000 * 1024 * 1024
)

// ImageLocality favours nodes that already have the pod's images, weighted by how widely
// each image is spread (so one node does not attract every pod of a popular image).
type ImageLocality struct {
	handle framework.Handle
}

var _ framework.ScorePlugin = (*ImageLocality)(nil)

// Name implements framework.Plugin.
func (*ImageLocality) Name() string { return ImageLocalityName }

// Score implements framework.ScorePlugin.
func (pl *ImageLocality) Score(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	total := len(pl.handle.SnapshotSharedLister().NodeInfos().List())
	if total == 0 {
		return 0, nil
	}
	var sum int64
	containers := 0
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			containers++
			st := lookupImage(ni.ImageStates, list[i].Image)
			if st != nil {
				sum += int64(float64(st.Size) * float64(st.NumNodes) / float64(total))
			}
		}
	}
	maxThreshold := imageMaxContainerThreshold * int64(containers)
	switch {
	case sum < imageMinThreshold:
		sum = imageMinThreshold
	case sum > maxThreshold:
		sum = maxThreshold
	}
	if maxThreshold == imageMinThreshold {
		return 0, nil
	}
	return framework.MaxNodeScore * (sum - imageMinThreshold) / (maxThreshold - imageMinThreshold), nil
}

// lookupImage matches the name as written and in its normalized docker.io form.
func lookupImage(states map[string]*framework.ImageStateSummary, image string) *framework.ImageStateSummary {
	if st, ok := states[image]; ok {
		return st
	}
	return states[normalizedImageName(image)]
}

func normalizedImageName(image string) string {
	name := image
	if !strings.Contains(name, "@") {
		last := name[strings.LastIndex(name, "/")+1:]
		if !strings.Contains(last, ":") {
			name += ":latest"
		}
	}
	first, _, hasSlash := strings.Cut(name, "/")
	if !hasSlash {
		return "docker.io/library/" + name
	}
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io/" + name
	}
	return name
}

// ScoreExtensions implements framework.ScorePlugin.
func (*ImageLocality) ScoreExtensions() framework.ScoreExtensions { return nil }
