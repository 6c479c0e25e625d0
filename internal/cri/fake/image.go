package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// image is a pulled image: only names and a size derived from the reference.
type image struct {
	id   string // "sha256:<hex>"
	ref  string // normalized reference, e.g. docker.io/library/nginx:latest
	size uint64
	// user is the image config's User ("" for root, "1234", "1234:5678", "name").
	user string
}

// digestRef is the repo digest a runtime reports as a container's image ref.
func (i *image) digestRef() string {
	return repository(i.ref) + "@" + i.id
}

// normalizeImage expands a reference the way containerd does: a missing registry is
// docker.io, a missing repository path is library/, a missing tag is :latest.
func normalizeImage(ref string) string {
	if ref == "" || strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	name := ref
	first, _, hasSlash := strings.Cut(name, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !hasSlash {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	if !strings.Contains(name, "@") && !strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
		name += ":latest"
	}
	return name
}

// repository strips the tag or digest from a normalized reference.
func repository(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		return ref[:i]
	}
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i]
	}
	return ref
}

func newImage(ref string) *image {
	sum := sha256.Sum256([]byte(ref))
	return &image{
		id:   "sha256:" + hex.EncodeToString(sum[:]),
		ref:  ref,
		size: 1<<20 + uint64(sum[0])<<16, // 1 MiB and a little, stable per image
	}
}

func (i *image) toAPI() *runtimeapi.Image {
	img := &runtimeapi.Image{
		Id:          i.id,
		RepoTags:    []string{i.ref},
		RepoDigests: []string{i.digestRef()},
		Size:        i.size,
		Spec:        &runtimeapi.ImageSpec{Image: i.ref},
	}
	// As containerd reports it: a numeric user is the uid, anything else the username.
	if name, _, _ := strings.Cut(i.user, ":"); name != "" {
		if uid, err := strconv.ParseInt(name, 10, 64); err == nil {
			img.Uid = &runtimeapi.Int64Value{Value: uid}
		} else {
			img.Username = name
		}
	}
	return img
}

// SetImageUser gives a present image the User of its config, as containerd reports
// it in ImageStatus; images have none (root) unless set.
func (r *Runtime) SetImageUser(ref, user string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if img, ok := r.lookupImageLocked(ref); ok {
		img.user = user
	}
}

func (r *Runtime) imageByIDLocked(id string) (*image, bool) {
	for _, img := range r.images {
		if img.id == id || img.digestRef() == id {
			return img, true
		}
	}
	return nil, false
}

// lookupImageLocked finds an image by reference, ID or repo digest.
func (r *Runtime) lookupImageLocked(ref string) (*image, bool) {
	if img, ok := r.images[normalizeImage(ref)]; ok {
		return img, true
	}
	return r.imageByIDLocked(ref)
}

// PreloadImages marks images as present without a pull, like images baked into a node.
func (r *Runtime) PreloadImages(refs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ref := range refs {
		n := normalizeImage(ref)
		r.images[n] = newImage(n)
	}
}

// ListImages implements runtimeapi.ImageServiceServer.
func (r *Runtime) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: r.listImages(req.GetFilter())}, nil
}

// StreamImages implements runtimeapi.ImageServiceServer with a single message.
func (r *Runtime) StreamImages(req *runtimeapi.StreamImagesRequest, s runtimeapi.ImageService_StreamImagesServer) error {
	return s.Send(&runtimeapi.StreamImagesResponse{Images: r.listImages(req.GetFilter())})
}

func (r *Runtime) listImages(f *runtimeapi.ImageFilter) []*runtimeapi.Image {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Image
	if want := f.GetImage().GetImage(); want != "" {
		if img, ok := r.lookupImageLocked(want); ok {
			out = append(out, img.toAPI())
		}
		return out
	}
	for _, img := range r.images {
		out = append(out, img.toAPI())
	}
	return out
}

// ImageStatus implements runtimeapi.ImageServiceServer: a missing image is a nil Image,
// not an error, as the CRI specifies.
func (r *Runtime) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if img, ok := r.lookupImageLocked(req.GetImage().GetImage()); ok {
		return &runtimeapi.ImageStatusResponse{Image: img.toAPI()}, nil
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

// PullImage implements runtimeapi.ImageServiceServer: pulls succeed instantly unless
// SetPullError configured a failure. It returns the image ID.
func (r *Runtime) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := normalizeImage(req.GetImage().GetImage())
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "image reference is empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("PullImage")
	if err := r.pullErrors[ref]; err != nil {
		return nil, err
	}
	if want := r.pullAuth[ref]; want != nil && (req.GetAuth().GetUsername() != want.Username || req.GetAuth().GetPassword() != want.Password) {
		return nil, status.Errorf(codes.Unknown, "failed to pull and unpack image %q: failed to resolve reference %q: pulling from host: 401 Unauthorized", ref, ref)
	}
	img, ok := r.images[ref]
	if !ok {
		img = newImage(ref)
		r.images[ref] = img
	}
	return &runtimeapi.PullImageResponse{ImageRef: img.id}, nil
}

// RemoveImage implements runtimeapi.ImageServiceServer; removing a missing image is not
// an error.
func (r *Runtime) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("RemoveImage")
	if img, ok := r.lookupImageLocked(req.GetImage().GetImage()); ok {
		delete(r.images, img.ref)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo implements runtimeapi.ImageServiceServer with the images' total size.
func (r *Runtime) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var used uint64
	for _, img := range r.images {
		used += img.size
	}
	fs := &runtimeapi.FilesystemUsage{
		Timestamp:  r.now(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/fake/images"},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(r.images)) * 100},
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}}, nil
}
