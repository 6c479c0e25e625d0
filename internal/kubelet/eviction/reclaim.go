package eviction

import (
	"context"
	"errors"
	"log/slog"

	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageGC reclaims disk by removing the images no container uses, as upstream's
// kubelet does first under disk pressure. Pinned images (the sandbox image) stay.
// Dead containers are left alone: this kubelet reads restart counts and last states
// from them.
type ImageGC struct {
	Runtime cri.RuntimeService
	Images  cri.ImageManagerService
	Logger  *slog.Logger
}

var _ Reclaimer = (*ImageGC)(nil)

// Reclaim removes every unused, unpinned image.
func (g *ImageGC) Reclaim(ctx context.Context) error {
	containers, err := g.Runtime.ListContainers(ctx, nil)
	if err != nil {
		return err
	}
	inUse := map[string]bool{}
	for _, c := range containers {
		inUse[c.GetImageRef()] = true
		inUse[c.GetImage().GetImage()] = true
	}
	images, err := g.Images.ListImages(ctx, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, img := range images {
		if img.GetPinned() || inUse[img.GetId()] {
			continue
		}
		used := false
		for _, name := range append(append([]string{}, img.GetRepoTags()...), img.GetRepoDigests()...) {
			used = used || inUse[name]
		}
		if used {
			continue
		}
		spec := img.GetSpec()
		if spec.GetImage() == "" {
			spec = &runtimeapi.ImageSpec{Image: img.GetId()}
		}
		if err := g.Images.RemoveImage(ctx, spec); err != nil {
			errs = append(errs, err)
			continue
		}
		if g.Logger != nil {
			g.Logger.Info("eviction: removed unused image", "image", img.GetId(), "tags", img.GetRepoTags(), "size", img.GetSize())
		}
	}
	return errors.Join(errs...)
}
