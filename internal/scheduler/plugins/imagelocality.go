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

var (
	_ framework.PreScorePlugin = (*ImageLocality)(nil)
	_ framework.ScorePlugin    = (*ImageLocality)(nil)
)

// podImages holds each container's image as written and normalized.
type podImages struct {
	names      [][2]string
	totalNodes int
}

func (p *podImages) Clone() framework.StateData { return p }

const imageLocalityKey framework.StateKey = "PreScore" + ImageLocalityName

// PreScore normalizes the pod's image names once.
func (pl *ImageLocality) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(imageLocalityKey, newPodImages(pod, len(pl.handle.SnapshotSharedLister().NodeInfos().List())))
	return nil
}

func newPodImages(pod *v1.Pod, totalNodes int) *podImages {
	p := &podImages{totalNodes: totalNodes}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			p.names = append(p.names, [2]string{list[i].Image, normalizedImageName(list[i].Image)})
		}
	}
	return p
}

// Name implements framework.Plugin.
func (*ImageLocality) Name() string { return ImageLocalityName }

// Score implements framework.ScorePlugin.
func (pl *ImageLocality) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	var images *podImages
	if d, ok := state.Read(imageLocalityKey); ok {
		images = d.(*podImages)
	} else {
		images = newPodImages(pod, len(pl.handle.SnapshotSharedLister().NodeInfos().List()))
	}
	if images.totalNodes == 0 {
		return 0, nil
	}
	var sum int64
	containers := len(images.names)
	for _, names := range images.names {
		if len(ni.ImageStates) == 0 { // nil for nodes without images: no lookups
			break
		}
		st, ok := ni.ImageStates[names[0]]
		if !ok {
			st = ni.ImageStates[names[1]]
		}
		if st != nil {
			sum += int64(float64(st.Size) * float64(st.NumNodes) / float64(images.totalNodes))
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
