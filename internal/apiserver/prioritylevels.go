package apiserver

import (
	"context"
	"net/http"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/apiserver/flowcontrol"
	"mizzen/internal/apiserver/maxinflight"
	"mizzen/internal/registry"
)

// longRunningSubresources are served for as long as the client stays (streams,
// proxies, logs): as upstream, they take no seat of a priority level.
var longRunningSubresources = map[string]bool{"exec": true, "attach": true, "portforward": true, "proxy": true, "log": true}

// longRunning reports whether a resource request is served for as long as the client
// stays: a watch or a long-running subresource.
func (info *requestInfo) longRunning() bool {
	return info.Verb == "watch" || longRunningSubresources[info.Subresource]
}

// describeForFlowControl fills in what API Priority and Fairness classifies a request
// by: its user, and the resource or path it names; and, for a list or a watch, the
// seats its work is estimated at.
func (s *Server) describeForFlowControl(r *http.Request, req *flowcontrol.Request) bool {
	user, ok := registry.UserFrom(r.Context())
	if !ok {
		return false
	}
	req.User, req.Path = user, r.URL.Path
	if info := requestInfoFrom(r.Context()); info != nil && info.Resource != "" {
		req.ResourceRequest = true
		req.Verb, req.APIGroup, req.Namespace = info.Verb, info.Group, info.Namespace
		req.Resource, req.Subresource = info.Resource, info.Subresource
		req.APIVersion, req.Name = info.Version, info.Name
		req.LongRunning = info.longRunning()
		switch info.Verb {
		case "list":
			req.Seats = s.listSeats(info, r)
		case "watch":
			if req.Name == "" {
				req.Name = selectedName(r) // as upstream's request info names it
			}
			req.Seats = s.watchSeats(info, req.Name != "", r)
			if f := indexedField(schema.GroupResource{Group: info.Group, Resource: info.Resource}); f != "" {
				req.IndexedWatch = selectedField(r, f) != ""
			}
		}
		return true
	}
	req.Verb = strings.ToLower(r.Method)
	return true
}

// listSeats estimates what a list costs, from its resource's object count and size
// in the watch cache (one seat for a resource the cache does not hold).
func (s *Server) listSeats(info *requestInfo, r *http.Request) int {
	count, size, counted := s.objectStats(info)
	return flowcontrol.ListSeats(count, size, counted, r.URL.Query())
}

// watchSeats estimates what a watch costs while it sends its initial events.
func (s *Server) watchSeats(info *requestInfo, named bool, r *http.Request) int {
	count, size, counted := s.objectStats(info)
	return flowcontrol.WatchSeats(count, size, counted, named, r.URL.Query())
}

// objectStats are the count and average size of a resource's objects in the watch
// cache (counted false for a resource the cache does not hold).
func (s *Server) objectStats(info *requestInfo) (count, size int64, counted bool) {
	if h := s.handlerAnyVersion(schema.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource}); h != nil {
		var n int
		n, size, counted = s.cache.Stats(h.segment)
		count = int64(n)
	}
	return count, size, counted
}

// describeForMaxInflight says which of the max-inflight limits' pools a request
// takes a slot of, as upstream's: get, list and watch read (a non-resource path's GET
// too), anything else mutates; long-running requests take none; system:masters may
// go beyond the limits.
func describeForMaxInflight(r *http.Request, req *maxinflight.Request) bool {
	verb := strings.ToLower(r.Method)
	if info := requestInfoFrom(r.Context()); info != nil && info.Resource != "" {
		verb = info.Verb
		req.LongRunning = info.longRunning()
	}
	req.Mutating = verb != "get" && verb != "list" && verb != "watch"
	if user, ok := registry.UserFrom(r.Context()); ok {
		req.Privileged = slices.Contains(user.Groups, authz.Masters)
	}
	return true
}

// rejectForLoad answers a request its priority level or the max-inflight limits
// turned away, as upstream: 429 with Retry-After.
func (s *Server) rejectForLoad(w http.ResponseWriter, r *http.Request, retryAfterSeconds int) {
	s.writeError(w, r, apierrors.NewTooManyRequests("Too many requests, please try again later.", retryAfterSeconds))
}

// writeFlowSchemaDangling sets a FlowSchema's Dangling condition through the status
// subresource, unless the stored object has it already.
func (s *Server) writeFlowSchemaDangling(ctx context.Context, name string, cond flowcontrolv1.FlowSchemaCondition) error {
	h := s.handlerForKind(flowcontrolv1.SchemeGroupVersion.Group, flowcontrolv1.SchemeGroupVersion.Version, "FlowSchema")
	if h == nil {
		return nil
	}
	_, err := s.updateObject(ctx, h, "", name, updateStatus, false, &fieldOwner{manager: flowControlFieldManager, subresource: "status"},
		func(current runtime.Object) (runtime.Object, error) {
			flowcontrol.SetDangling(current.(*flowcontrolv1.FlowSchema), cond)
			return current, nil
		})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err
}

// flowControlFieldManager is the manager upstream's apiserver writes FlowSchema
// conditions as.
const flowControlFieldManager = "api-priority-and-fairness-config-consumer-v1"
