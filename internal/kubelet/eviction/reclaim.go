package eviction

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Upstream's image garbage collection periods: how often images are detected, and how
// long an image must have been known before it may be removed (so that an image
// pulled for a container about to be created is not taken from under it).
const (
	imageDetectPeriod = 5 * time.Minute
	imageMinAge       = 2 * time.Minute
)

// ImageGCOptions configure an ImageGC; all but Logger are required.
type ImageGCOptions struct {
	Runtime cri.RuntimeService
	Images  cri.ImageManagerService
	Clock   clock.WithTicker
	Logger  *slog.Logger
}

// ImageGC reclaims disk by removing the images no container uses, as upstream's
// kubelet does first under disk pressure: not pinned ones (the sandbox image), nor
// ones first seen less than two minutes ago. Dead containers are left alone: this
// kubelet reads restart counts and last states from them.
type ImageGC struct {
	opts ImageGCOptions

	mu        sync.Mutex
	firstSeen map[string]time.Time // by image ID
}

var _ Reclaimer = (*ImageGC)(nil)

// NewImageGC returns an ImageGC; Run keeps its record of when images appeared.
func NewImageGC(opts ImageGCOptions) (*ImageGC, error) {
	if opts.Runtime == nil || opts.Images == nil || opts.Clock == nil {
		return nil, errors.New("eviction: Runtime, Images and Clock are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &ImageGC{opts: opts, firstSeen: map[string]time.Time{}}, nil
}

// Run detects the node's images now and every five minutes until ctx ends.
func (g *ImageGC) Run(ctx context.Context) {
	t := g.opts.Clock.NewTicker(imageDetectPeriod)
	defer t.Stop()
	for {
		if _, err := g.detect(ctx); err != nil && ctx.Err() == nil {
			g.opts.Logger.Error("eviction: listing images", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// detect lists the images, records when each was first seen, and forgets the gone.
func (g *ImageGC) detect(ctx context.Context) ([]*runtimeapi.Image, error) {
	images, err := g.opts.Images.ListImages(ctx, nil)
	if err != nil {
		return nil, err
	}
	now := g.opts.Clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	present := make(map[string]bool, len(images))
	for _, img := range images {
		present[img.GetId()] = true
		if _, ok := g.firstSeen[img.GetId()]; !ok {
			g.firstSeen[img.GetId()] = now
		}
	}
	for id := range g.firstSeen {
		if !present[id] {
			delete(g.firstSeen, id)
		}
	}
	return images, nil
}

// oldEnough reports whether the image was first seen at least the minimum age ago.
func (g *ImageGC) oldEnough(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen, ok := g.firstSeen[id]
	return ok && g.opts.Clock.Since(seen) >= imageMinAge
}

// Reclaim removes every unused, unpinned image old enough.
func (g *ImageGC) Reclaim(ctx context.Context) error {
	containers, err := g.opts.Runtime.ListContainers(ctx, nil)
	if err != nil {
		return err
	}
	inUse := map[string]bool{}
	for _, c := range containers {
		inUse[c.GetImageRef()] = true
		inUse[c.GetImage().GetImage()] = true
	}
	images, err := g.detect(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, img := range images {
		if img.GetPinned() || inUse[img.GetId()] || !g.oldEnough(img.GetId()) {
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
		if err := g.opts.Images.RemoveImage(ctx, spec); err != nil {
			errs = append(errs, err)
			continue
		}
		g.opts.Logger.Info("eviction: removed unused image", "image", img.GetId(), "tags", img.GetRepoTags(), "size", img.GetSize())
	}
	return errors.Join(errs...)
}
