// Package fake is an in-memory CRI runtime for hollow nodes and tests. Sandboxes and
// containers are records, not processes: a container "runs" from StartContainer until it
// is stopped or until the exit its Behavior configures falls due on the runtime's clock.
// Exits are evaluated lazily whenever state is read, so an idle container costs no
// goroutine and no timer. The runtime serves the CRI gRPC services over a Unix socket
// (Serve) or in-process through Client.
package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Options configure a Runtime. The zero value is usable.
type Options struct {
	// Clock drives timestamps and configured exits; the real clock when nil.
	Clock clock.PassiveClock
	// RuntimeName and RuntimeVersion are what Version reports; the kubelet prefixes
	// container IDs with the name ("<name>://<id>"). Defaults: "fake", "0.1.0".
	RuntimeName    string
	RuntimeVersion string
	// PodCIDR is the range sandbox IPs are handed out from; default 10.88.0.0/16.
	PodCIDR string
	// HostIP is the IP reported for host-network sandboxes.
	HostIP string
	// RecordCalls keeps an ordered log of the sandbox and container lifecycle calls
	// (see CallLog), for tests that assert the order of what a kubelet did. Off by
	// default: the log grows with every call.
	RecordCalls bool
}

// Call is one lifecycle call in the log: the CRI method and the ID of the sandbox or
// container it acted on (the new one's for RunPodSandbox and CreateContainer).
type Call struct {
	Method string
	ID     string
}

// Behavior says what a container does once started. The zero value runs until stopped.
type Behavior struct {
	// Exits makes the container exit on its own After its start, with ExitCode.
	Exits    bool
	After    time.Duration
	ExitCode int32
	// Reason overrides the termination reason ("Completed" for 0, else "Error").
	Reason string
	// ExecExitCode and ExecStdout are the result of every ExecSync in the container.
	ExecExitCode int32
	ExecStdout   string
	// ExecHangs makes every ExecSync in the container a command that does not end by
	// itself: it is given up, with codes.DeadlineExceeded as a runtime answers, when the
	// request's timeout has passed (in real time) or the caller's context ends.
	ExecHangs bool
	// WritableLayerBytes, when not zero, is the writable layer usage ContainerStats
	// reports (32 KiB otherwise); it applies at once.
	WritableLayerBytes uint64
}

// Runtime is the in-memory CRI runtime. It implements runtimeapi.RuntimeServiceServer and
// runtimeapi.ImageServiceServer; all methods are safe for concurrent use.
type Runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	clock         clock.PassiveClock
	name, version string
	prefix        netip.Prefix
	hostIP        string
	mu            sync.Mutex
	nextIP        netip.Addr
	sandboxes     map[string]*sandbox
	containers    map[string]*container
	// podSandboxes and podContainers index the records by their pod UID label, by
	// ID: a kubelet lists one pod's sandboxes and containers on every sync of it.
	podSandboxes  map[string]map[string]*sandbox
	podContainers map[string]map[string]*container
	images        map[string]*image // by normalized reference
	byName        map[string]Behavior
	byImage       map[string]Behavior
	pullErrors    map[string]error
	pullAuth      map[string]*runtimeapi.AuthConfig
	calls         map[string]int
	recordCalls   bool
	callLog       []Call
}

// A sandbox's and a container's meta, labels and annotations never change after
// creation: the lists share them (see toAPI).
type sandbox struct {
	id          string
	meta        *runtimeapi.PodSandboxMetadata
	labels      map[string]string
	annotations map[string]string
	state       runtimeapi.PodSandboxState
	createdAt   int64
	ip          string
	handler     string
	// listed is what ListPodSandbox last returned for it, given out again while its
	// state is the same (see Client: list results are read-only).
	listed *runtimeapi.PodSandbox
}

type container struct {
	id          string
	sandboxID   string
	meta        *runtimeapi.ContainerMetadata
	image       string                // as requested
	imageSpec   *runtimeapi.ImageSpec // {Image: image}, shared by the lists
	imageRef    string
	imageID     string
	labels      map[string]string
	annotations map[string]string
	logPath     string
	mounts      []*runtimeapi.Mount
	state       runtimeapi.ContainerState
	createdAt   int64
	startedAt   int64
	finishedAt  int64
	exitAt      int64 // unix nanos of a configured exit; 0 when it runs until stopped
	exitCode    int32
	reason      string
	exitReason  string // reason to report when exitAt falls due
	// listed is what ListContainers last returned for it, given out again while its
	// state is the same.
	listed *runtimeapi.Container
}

// New returns an empty runtime.
func New(opts Options) *Runtime {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RuntimeName == "" {
		opts.RuntimeName = "fake"
	}
	if opts.RuntimeVersion == "" {
		opts.RuntimeVersion = "0.1.0"
	}
	prefix, err := netip.ParsePrefix(opts.PodCIDR)
	if err != nil {
		prefix = netip.MustParsePrefix("10.88.0.0/16")
	}
	prefix = prefix.Masked()
	return &Runtime{
		clock:         opts.Clock,
		name:          opts.RuntimeName,
		version:       opts.RuntimeVersion,
		prefix:        prefix,
		hostIP:        opts.HostIP,
		nextIP:        prefix.Addr().Next(),
		sandboxes:     map[string]*sandbox{},
		containers:    map[string]*container{},
		podSandboxes:  map[string]map[string]*sandbox{},
		podContainers: map[string]map[string]*container{},
		images:        map[string]*image{},
		byName:        map[string]Behavior{},
		byImage:       map[string]Behavior{},
		pullErrors:    map[string]error{},
		pullAuth:      map[string]*runtimeapi.AuthConfig{},
		calls:         map[string]int{},
		recordCalls:   opts.RecordCalls,
	}
}

// SetContainerBehavior sets the behaviour of containers with this name (CRI metadata
// name, i.e. the pod spec's container name). It takes precedence over image behaviour.
// Exit settings apply to containers started afterwards; exec settings apply at once.
func (r *Runtime) SetContainerBehavior(name string, b Behavior) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byName[name] = b
}

// SetImageBehavior sets the behaviour of containers created from this image.
func (r *Runtime) SetImageBehavior(image string, b Behavior) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byImage[normalizeImage(image)] = b
}

// SetPullError makes pulls of image fail with err (nil clears it).
func (r *Runtime) SetPullError(image string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.pullErrors, normalizeImage(image))
		return
	}
	r.pullErrors[normalizeImage(image)] = err
}

// RequireAuth makes image private: its pulls fail as a registry's 401 unless they carry
// this username and password.
func (r *Runtime) RequireAuth(image, username, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pullAuth[normalizeImage(image)] = &runtimeapi.AuthConfig{Username: username, Password: password}
}

// Calls reports how many times the named CRI method (e.g. "StartContainer") was called.
func (r *Runtime) Calls(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

func (r *Runtime) count(method string) { r.calls[method]++ }

// CallLog returns the lifecycle calls made so far, in order; it is empty unless
// Options.RecordCalls was set.
func (r *Runtime) CallLog() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.callLog...)
}

// logCall appends a lifecycle call to the log when recording; r.mu must be held.
func (r *Runtime) logCall(method, id string) {
	if r.recordCalls {
		r.callLog = append(r.callLog, Call{Method: method, ID: id})
	}
}

// behaviorLocked finds the behaviour for a container by name, then by image.
func (r *Runtime) behaviorLocked(c *container) Behavior {
	if b, ok := r.byName[c.meta.GetName()]; ok {
		return b
	}
	return r.byImage[normalizeImage(c.image)]
}

func (r *Runtime) now() int64 { return r.clock.Now().UnixNano() }

func newID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
}

// refreshLocked applies a configured exit that has fallen due.
func (r *Runtime) refreshLocked(c *container, now int64) {
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING && c.exitAt != 0 && now >= c.exitAt {
		c.state = runtimeapi.ContainerState_CONTAINER_EXITED
		c.finishedAt = c.exitAt
		c.reason = c.exitReason
	}
}

func exitReason(code int32, override string) string {
	switch {
	case override != "":
		return override
	case code == 0:
		return "Completed"
	default:
		return "Error"
	}
}

// Version implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       r.name,
		RuntimeVersion:    r.version,
		RuntimeApiVersion: "v1",
	}, nil
}

// Status implements runtimeapi.RuntimeServiceServer: the runtime and its network are
// always ready.
func (r *Runtime) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}}},
	}, nil
}

// RuntimeConfig implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{
		Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS},
	}, nil
}

// UpdateRuntimeConfig implements runtimeapi.RuntimeServiceServer; the fake has nothing
// to reconfigure.
func (r *Runtime) UpdateRuntimeConfig(context.Context, *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// RunPodSandbox implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	if cfg.GetMetadata().GetUid() == "" || cfg.GetMetadata().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox config must include metadata name and uid")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("RunPodSandbox")
	sb := &sandbox{
		id: newID(),
		meta: &runtimeapi.PodSandboxMetadata{
			Name: cfg.Metadata.Name, Uid: cfg.Metadata.Uid,
			Namespace: cfg.Metadata.Namespace, Attempt: cfg.Metadata.Attempt,
		},
		labels:      maps.Clone(cfg.Labels),
		annotations: maps.Clone(cfg.Annotations),
		state:       runtimeapi.PodSandboxState_SANDBOX_READY,
		createdAt:   r.now(),
		handler:     req.RuntimeHandler,
	}
	if cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		sb.ip = r.hostIP
	} else {
		sb.ip = r.allocateIPLocked()
	}
	r.sandboxes[sb.id] = sb
	addIndexed(r.podSandboxes, sb.labels[labelPodUID], sb.id, sb)
	r.logCall("RunPodSandbox", sb.id)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: sb.id}, nil
}

// allocateIPLocked hands out the next address of the pod CIDR, wrapping around.
func (r *Runtime) allocateIPLocked() string {
	ip := r.nextIP
	next := ip.Next()
	if !r.prefix.Contains(next) || !next.IsValid() {
		next = r.prefix.Addr().Next()
	}
	r.nextIP = next
	return ip.String()
}

// StopPodSandbox implements runtimeapi.RuntimeServiceServer; it stops the sandbox's
// containers too. Stopping an unknown sandbox is not an error, as in containerd.
func (r *Runtime) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("StopPodSandbox")
	r.logCall("StopPodSandbox", req.PodSandboxId)
	sb, ok := r.sandboxes[req.PodSandboxId]
	if !ok {
		return &runtimeapi.StopPodSandboxResponse{}, nil
	}
	now := r.now()
	for _, c := range r.containers {
		if c.sandboxID == sb.id {
			r.stopLocked(c, now)
		}
	}
	sb.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox implements runtimeapi.RuntimeServiceServer; it removes the sandbox's
// containers too.
func (r *Runtime) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("RemovePodSandbox")
	r.logCall("RemovePodSandbox", req.PodSandboxId)
	for id, c := range r.containers {
		if c.sandboxID == req.PodSandboxId {
			delete(r.containers, id)
			removeIndexed(r.podContainers, c.labels[labelPodUID], id)
		}
	}
	if sb, ok := r.sandboxes[req.PodSandboxId]; ok {
		delete(r.sandboxes, req.PodSandboxId)
		removeIndexed(r.podSandboxes, sb.labels[labelPodUID], sb.id)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// toStatus is the sandbox as PodSandboxStatus reports it. Its labels and annotations
// are the record's own, shared as toAPI's are: the kubelet keeps each status until the
// sandbox's state changes, and the hollow nodes hold one per pod.
func (sb *sandbox) toStatus() *runtimeapi.PodSandboxStatus {
	st := &runtimeapi.PodSandboxStatus{
		Id:             sb.id,
		Metadata:       cloneSandboxMeta(sb.meta),
		State:          sb.state,
		CreatedAt:      sb.createdAt,
		Labels:         sb.labels,
		Annotations:    sb.annotations,
		RuntimeHandler: sb.handler,
		Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: sb.ip},
	}
	return st
}

// toAPI is the sandbox as ListPodSandbox reports it. Its metadata, labels and
// annotations are the record's own, shared and not copied: the runtime never changes
// them after RunPodSandbox, and the lists are what every kubelet's PLEG reads every
// second, where copying every record's maps cost the hollow nodes a good part of their
// CPU (BENCHMARKS.md, dens18). Callers must not modify them; the kubelet only reads
// what it lists (internal/kubelet's relist, readPodRuntime, orphan and static pod
// clean-up, its server's runtime lookups and metrics, eviction, log rotation), and a
// remote caller gets its own copy through gRPC. Statuses, read far less often, are
// still copies.
// toAPI is the sandbox as ListPodSandbox returns it. Only its state changes after
// creation, so the record made for a list is kept and given out while the state is
// the same: each hollow node's relist lists every sandbox every second, and a new
// record each time was a large share of what the hollow nodes allocated.
func (sb *sandbox) toAPI() *runtimeapi.PodSandbox {
	if sb.listed == nil || sb.listed.State != sb.state {
		sb.listed = &runtimeapi.PodSandbox{
			Id: sb.id, Metadata: sb.meta, State: sb.state, CreatedAt: sb.createdAt,
			Labels: sb.labels, Annotations: sb.annotations, RuntimeHandler: sb.handler,
		}
	}
	return sb.listed
}

func cloneSandboxMeta(m *runtimeapi.PodSandboxMetadata) *runtimeapi.PodSandboxMetadata {
	return &runtimeapi.PodSandboxMetadata{Name: m.Name, Uid: m.Uid, Namespace: m.Namespace, Attempt: m.Attempt}
}

// PodSandboxStatus implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("PodSandboxStatus")
	sb, ok := r.sandboxes[req.PodSandboxId]
	if !ok {
		return nil, notFound("sandbox", req.PodSandboxId)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: sb.toStatus()}, nil
}

// ListPodSandbox implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: r.listSandboxes(req.GetFilter())}, nil
}

// StreamPodSandboxes implements runtimeapi.RuntimeServiceServer with a single message.
func (r *Runtime) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, s runtimeapi.RuntimeService_StreamPodSandboxesServer) error {
	return s.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: r.listSandboxes(req.GetFilter())})
}

func (r *Runtime) listSandboxes(f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	candidates := r.sandboxes
	if uid, ok := f.GetLabelSelector()[labelPodUID]; ok {
		candidates = r.podSandboxes[uid]
	}
	out := make([]*runtimeapi.PodSandbox, 0, len(candidates))
	for _, sb := range candidates {
		if f.GetId() != "" && f.Id != sb.id {
			continue
		}
		if f.GetState() != nil && f.State.State != sb.state {
			continue
		}
		if !labelsMatch(sb.labels, f.GetLabelSelector()) {
			continue
		}
		out = append(out, sb.toAPI())
	}
	return out
}

// labelPodUID is the label the kubelet puts its pod's UID in, which the records are
// indexed by.
const labelPodUID = "io.kubernetes.pod.uid"

// addIndexed and removeIndexed keep a by-pod index: the records with the pod UID
// label value uid (records without the label under ""), by ID.
func addIndexed[T any](index map[string]map[string]T, uid, id string, v T) {
	if index[uid] == nil {
		index[uid] = map[string]T{}
	}
	index[uid][id] = v
}

func removeIndexed[T any](index map[string]map[string]T, uid, id string) {
	delete(index[uid], id)
	if len(index[uid]) == 0 {
		delete(index, uid)
	}
}

func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// CreateContainer implements runtimeapi.RuntimeServiceServer. The image must have been
// pulled, as with a real runtime.
func (r *Runtime) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	if cfg.GetMetadata().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "container config must include metadata name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("CreateContainer")
	sb, ok := r.sandboxes[req.PodSandboxId]
	if !ok {
		return nil, notFound("sandbox", req.PodSandboxId)
	}
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %q is not ready", sb.id)
	}
	img, ok := r.images[normalizeImage(cfg.GetImage().GetImage())]
	if !ok {
		img, ok = r.imageByIDLocked(cfg.GetImage().GetImage())
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "failed to get image %q: not found", cfg.GetImage().GetImage())
	}
	// An image volume's image must have been pulled too, as containerd 2.1's mounts ask.
	for _, m := range cfg.GetMounts() {
		if ref := m.GetImage().GetImage(); ref != "" {
			if _, ok := r.images[normalizeImage(ref)]; !ok {
				if _, ok := r.imageByIDLocked(ref); !ok {
					return nil, status.Errorf(codes.NotFound, "failed to get image volume %q: not found", ref)
				}
			}
		}
	}
	for _, c := range r.containers {
		if c.sandboxID == sb.id && c.meta.Name == cfg.Metadata.Name && c.meta.Attempt == cfg.Metadata.Attempt {
			return nil, status.Errorf(codes.AlreadyExists, "container name %q attempt %d already exists in sandbox %q",
				c.meta.Name, c.meta.Attempt, sb.id)
		}
	}
	c := &container{
		id:          newID(),
		sandboxID:   sb.id,
		meta:        &runtimeapi.ContainerMetadata{Name: cfg.Metadata.Name, Attempt: cfg.Metadata.Attempt},
		image:       cfg.Image.Image,
		imageSpec:   &runtimeapi.ImageSpec{Image: cfg.Image.Image},
		imageRef:    img.digestRef(),
		imageID:     img.id,
		labels:      maps.Clone(cfg.Labels),
		annotations: maps.Clone(cfg.Annotations),
		mounts:      cloneMounts(cfg.Mounts),
		state:       runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt:   r.now(),
	}
	if cfg.LogPath != "" {
		c.logPath = req.GetSandboxConfig().GetLogDirectory() + "/" + cfg.LogPath
	}
	r.containers[c.id] = c
	addIndexed(r.podContainers, c.labels[labelPodUID], c.id, c)
	r.logCall("CreateContainer", c.id)
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

// StartContainer implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("StartContainer")
	r.logCall("StartContainer", req.ContainerId)
	c, ok := r.containers[req.ContainerId]
	if !ok {
		return nil, notFound("container", req.ContainerId)
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is in %s state, not created", c.id, c.state)
	}
	now := r.now()
	c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.startedAt = now
	if b := r.behaviorLocked(c); b.Exits {
		c.exitAt = now + int64(b.After)
		if c.exitAt == now {
			c.exitAt++ // still "ran": finishedAt strictly after startedAt
		}
		c.exitCode = b.ExitCode
		c.exitReason = exitReason(b.ExitCode, b.Reason)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// stopLocked ends a running container as a signal would: exit code 137 after a kill,
// reason "Error", unless it already exited on its own.
func (r *Runtime) stopLocked(c *container, now int64) {
	r.refreshLocked(c, now)
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		c.state = runtimeapi.ContainerState_CONTAINER_EXITED
		c.finishedAt = now
		c.exitCode = 137
		c.reason = "Error"
	}
	// A created container that never started stays created, as containerd's does: it
	// has no process to stop, and only RemoveContainer (or StartContainer) moves it.
	c.exitAt = 0
}

// StopContainer implements runtimeapi.RuntimeServiceServer. The fake honours the grace
// period instantly: a fake process always dies on the first signal.
func (r *Runtime) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("StopContainer")
	r.logCall("StopContainer", req.ContainerId)
	c, ok := r.containers[req.ContainerId]
	if !ok {
		return nil, notFound("container", req.ContainerId)
	}
	r.stopLocked(c, r.now())
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer implements runtimeapi.RuntimeServiceServer. Removing a missing
// container is not an error, as in containerd.
func (r *Runtime) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("RemoveContainer")
	r.logCall("RemoveContainer", req.ContainerId)
	if c, ok := r.containers[req.ContainerId]; ok {
		r.refreshLocked(c, r.now())
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return nil, status.Errorf(codes.FailedPrecondition, "container %q is running, stop it first", c.id)
		}
	}
	if c, ok := r.containers[req.ContainerId]; ok {
		delete(r.containers, req.ContainerId)
		removeIndexed(r.podContainers, c.labels[labelPodUID], c.id)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// toAPI is the container as ListContainers reports it, sharing the record's metadata,
// image spec, labels and annotations, which never change after CreateContainer: as
// sandbox.toAPI, callers must not modify them.
// toAPI is the container as ListContainers returns it, kept while its state is
// unchanged, as a sandbox's record is (see sandbox.toAPI).
func (c *container) toAPI() *runtimeapi.Container {
	if c.listed == nil || c.listed.State != c.state {
		c.listed = &runtimeapi.Container{
			Id:           c.id,
			PodSandboxId: c.sandboxID,
			Metadata:     c.meta,
			Image:        c.imageSpec,
			ImageRef:     c.imageRef,
			ImageId:      c.imageID,
			State:        c.state,
			CreatedAt:    c.createdAt,
			Labels:       c.labels,
			Annotations:  c.annotations,
		}
	}
	return c.listed
}

// toStatus is the container as ContainerStatus reports it. Its labels, annotations and
// mounts are the record's own, shared as toAPI's are (the runtime never changes them
// after CreateContainer): the kubelet keeps each status until the container's state
// changes, and the hollow nodes hold one per container.
func (c *container) toStatus() *runtimeapi.ContainerStatus {
	st := &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.meta.Name, Attempt: c.meta.Attempt},
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		Image:       &runtimeapi.ImageSpec{Image: c.image},
		ImageRef:    c.imageRef,
		ImageId:     c.imageID,
		Labels:      c.labels,
		Annotations: c.annotations,
		LogPath:     c.logPath,
		Mounts:      c.mounts,
	}
	if c.state == runtimeapi.ContainerState_CONTAINER_EXITED {
		st.ExitCode = c.exitCode
		st.Reason = c.reason
	}
	return st
}

// ListContainers implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	r.mu.Lock()
	r.count("ListContainers")
	r.mu.Unlock()
	return &runtimeapi.ListContainersResponse{Containers: r.listContainers(req.GetFilter())}, nil
}

// StreamContainers implements runtimeapi.RuntimeServiceServer with a single message.
func (r *Runtime) StreamContainers(req *runtimeapi.StreamContainersRequest, s runtimeapi.RuntimeService_StreamContainersServer) error {
	return s.Send(&runtimeapi.StreamContainersResponse{Containers: r.listContainers(req.GetFilter())})
}

func (r *Runtime) listContainers(f *runtimeapi.ContainerFilter) []*runtimeapi.Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	candidates := r.containers
	if uid, ok := f.GetLabelSelector()[labelPodUID]; ok {
		candidates = r.podContainers[uid]
	}
	out := make([]*runtimeapi.Container, 0, len(candidates))
	for _, c := range candidates {
		r.refreshLocked(c, now)
		if f.GetId() != "" && f.Id != c.id {
			continue
		}
		if f.GetPodSandboxId() != "" && f.PodSandboxId != c.sandboxID {
			continue
		}
		if f.GetState() != nil && f.State.State != c.state {
			continue
		}
		if !labelsMatch(c.labels, f.GetLabelSelector()) {
			continue
		}
		out = append(out, c.toAPI())
	}
	return out
}

// ContainerStatus implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("ContainerStatus")
	c, ok := r.containers[req.ContainerId]
	if !ok {
		return nil, notFound("container", req.ContainerId)
	}
	r.refreshLocked(c, r.now())
	return &runtimeapi.ContainerStatusResponse{Status: c.toStatus()}, nil
}

// UpdateContainerResources implements runtimeapi.RuntimeServiceServer; the fake checks
// that the container exists and counts the call.
func (r *Runtime) UpdateContainerResources(_ context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.containers[req.ContainerId]; !ok {
		return nil, notFound("container", req.ContainerId)
	}
	r.count("UpdateContainerResources")
	r.logCall("UpdateContainerResources", req.ContainerId)
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// UpdatePodSandboxResources implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) UpdatePodSandboxResources(_ context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sandboxes[req.PodSandboxId]; !ok {
		return nil, notFound("sandbox", req.PodSandboxId)
	}
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}

// ReopenContainerLog implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("ReopenContainerLog")
	c, ok := r.containers[req.ContainerId]
	if !ok {
		return nil, notFound("container", req.ContainerId)
	}
	r.refreshLocked(c, r.now())
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not running", c.id)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// ExecSync implements runtimeapi.RuntimeServiceServer: the result is the container's
// configured exec result; the command itself is not interpreted.
func (r *Runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	b, err := r.execBehavior(req.ContainerId)
	if err != nil {
		return nil, err
	}
	if b.ExecHangs {
		var limit <-chan time.Time
		if req.Timeout > 0 {
			t := time.NewTimer(time.Duration(req.Timeout) * time.Second)
			defer t.Stop()
			limit = t.C
		}
		select {
		case <-ctx.Done():
		case <-limit:
		}
		return nil, status.Errorf(codes.DeadlineExceeded, "timeout %ds exceeded: context deadline exceeded", req.Timeout)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(b.ExecStdout), ExitCode: b.ExecExitCode}, nil
}

// execBehavior counts an ExecSync and returns the behaviour of its container, which
// must be running.
func (r *Runtime) execBehavior(id string) (Behavior, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("ExecSync")
	c, ok := r.containers[id]
	if !ok {
		return Behavior{}, notFound("container", id)
	}
	r.refreshLocked(c, r.now())
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return Behavior{}, status.Errorf(codes.FailedPrecondition, "container %q is not running", c.id)
	}
	return r.behaviorLocked(c), nil
}

// String describes the runtime's contents, for test failure messages.
func (r *Runtime) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("fake runtime: %d sandboxes, %d containers, %d images",
		len(r.sandboxes), len(r.containers), len(r.images))
}

func cloneImageSpec(in *runtimeapi.ImageSpec) *runtimeapi.ImageSpec {
	if in == nil {
		return nil
	}
	return &runtimeapi.ImageSpec{Image: in.Image, UserSpecifiedImage: in.UserSpecifiedImage}
}

// cloneMounts copies the mounts a container was created with, as a real runtime
// reports them back in its status.
func cloneMounts(in []*runtimeapi.Mount) []*runtimeapi.Mount {
	out := make([]*runtimeapi.Mount, 0, len(in))
	for _, m := range in {
		out = append(out, &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath,
			Readonly: m.Readonly, SelinuxRelabel: m.SelinuxRelabel, Propagation: m.Propagation,
			Image: cloneImageSpec(m.Image), ImageSubPath: m.ImageSubPath})
	}
	return out
}
