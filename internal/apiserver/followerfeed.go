package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
	"mizzen/internal/storage"
)

// followerFeed keeps the Followers current from the watch cache (the authorizers that
// follow stored objects, RBAC; the priority-and-fairness configuration): one watch per
// resource they follow, in-process, so that a request's authorization or
// classification never reads etcd.
type followerFeed struct {
	// followers are, per resource, those that follow it.
	followers map[schema.GroupResource][]authz.Follower
	// sifters are, per resource every follower of which is a FieldSifter, those
	// followers: an object all of them ignore is not decoded.
	sifters map[schema.GroupResource][]authz.FieldSifter
	// resources are those the feed follows.
	resources []schema.GroupResource
	// fed is, per resource segment, the newest revision the followers have been given.
	fed map[string]*atomic.Int64
	// synced counts resources whose initial list the followers have.
	synced atomic.Int32
}

// newFollowerFeed returns the feed of the followers given, nil when there are none. A
// resource the server does not store (a server built with some resources only) is
// given an empty list at once.
func newFollowerFeed(followers []authz.Follower, stored map[schema.GroupResource]*registry.Resource) *followerFeed {
	if len(followers) == 0 {
		return nil
	}
	feed := &followerFeed{followers: map[schema.GroupResource][]authz.Follower{}, fed: map[string]*atomic.Int64{}}
	for _, f := range followers {
		for _, gr := range f.Resources() {
			if stored[gr] == nil {
				f.Replace(gr, nil)
				continue
			}
			if _, ok := feed.followers[gr]; !ok {
				feed.resources = append(feed.resources, gr)
				feed.fed[segmentFor(gr)] = &atomic.Int64{}
			}
			feed.followers[gr] = append(feed.followers[gr], f)
		}
	}
	feed.sifters = map[schema.GroupResource][]authz.FieldSifter{}
	for gr, fls := range feed.followers {
		var sifters []authz.FieldSifter
		for _, fl := range fls {
			if s, ok := fl.(authz.FieldSifter); ok {
				sifters = append(sifters, s)
			}
		}
		if len(sifters) == len(fls) {
			feed.sifters[gr] = sifters
		}
	}
	return feed
}

// ignored reports whether every follower of gr ignores the entry's object, which then
// need not be decoded.
func (f *followerFeed) ignored(gr schema.GroupResource, e *storage.Entry) bool {
	sifters := f.sifters[gr]
	if len(sifters) == 0 {
		return false
	}
	for _, s := range sifters {
		// A pointer to the pairs: the slice itself would be copied to the heap.
		if !s.Ignores(gr, &e.Fields) {
			return false
		}
	}
	return true
}

// run follows every resource until ctx ends.
func (f *followerFeed) run(ctx context.Context, s *Server) {
	for _, gr := range f.resources {
		go f.follow(ctx, s, gr)
	}
}

// follow feeds one resource: the initial list as one Replace, then each change. A
// watch that ends (the cache reloaded after etcd compacted) starts again with a list.
func (f *followerFeed) follow(ctx context.Context, s *Server, gr schema.GroupResource) {
	segment := segmentFor(gr)
	first := true
	for ctx.Err() == nil {
		w, err := s.cache.Watch(segment, storage.WatchOptions{InitialEvents: true, InitialEventsEnd: true})
		if err != nil {
			s.log.Warn("follower feed: watch failed", "resource", gr.String(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		var initial []runtime.Object
		listing := true
		for {
			evs, err := w.Next(ctx)
			if err != nil {
				break
			}
			for _, ev := range evs {
				if ev.Type != watch.Bookmark && f.ignored(gr, ev.Entry) {
					f.advance(segment, ev.RV)
					continue
				}
				var obj runtime.Object
				if ev.Type != watch.Bookmark {
					if obj, err = ev.Entry.Object(); err != nil {
						s.log.Error("follower feed: reading an object from the cache", "key", ev.Entry.Key, "err", err)
						f.advance(segment, ev.RV)
						continue
					}
				}
				switch {
				case listing && ev.IsInitialEventsEnd():
					for _, fl := range f.followers[gr] {
						fl.Replace(gr, initial)
					}
					initial, listing = nil, false
					if first {
						first = false
						f.synced.Add(1)
					}
				case listing:
					if ev.Type == watch.Added {
						initial = append(initial, obj)
					}
					f.advance(segment, ev.RV)
					continue
				case ev.Type == watch.Added || ev.Type == watch.Modified:
					for _, fl := range f.followers[gr] {
						fl.Apply(obj, false)
					}
				case ev.Type == watch.Deleted:
					for _, fl := range f.followers[gr] {
						fl.Apply(obj, true)
					}
				}
				f.advance(segment, ev.RV)
			}
		}
		s.cache.StopWatch(w)
	}
}

func (f *followerFeed) advance(segment string, rv int64) {
	fed := f.fed[segment]
	for {
		cur := fed.Load()
		if rv <= cur || fed.CompareAndSwap(cur, rv) {
			return
		}
	}
}

// isSynced reports whether the follower has every resource's initial list.
func (f *followerFeed) isSynced() bool { return int(f.synced.Load()) == len(f.fed) }

// WaitAuthorizerFresh waits until the authorizer has every object the watch cache
// holds of the resources it follows, once the cache has caught up with etcd, so that
// policy just written (the default roles at start) already applies. Without such an
// authorizer it returns at once.
func (s *Server) WaitAuthorizerFresh(ctx context.Context) error {
	f := s.followerFeed
	if f == nil {
		return nil
	}
	// The cache first catches up with etcd: policy written a moment ago must be in it
	// before the authorizer is compared with it.
	rev, err := s.store.CurrentRevision(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the authorizer to see the stored policy: %w", err)
	}
	for {
		err := s.cache.WaitFresh(ctx, rev, consistentReadTimeout)
		if err == nil {
			break
		}
		if !errors.Is(err, storage.ErrTooLargeRV) || ctx.Err() != nil {
			return fmt.Errorf("waiting for the authorizer to see the stored policy: %w", err)
		}
	}
	for {
		fresh := f.isSynced()
		for segment, fed := range f.fed {
			if !fresh {
				break
			}
			entries, _, err := s.cache.List(segment, storage.Prefix+segment+"/", nil)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if e.RV > fed.Load() {
					fresh = false
					break
				}
			}
		}
		if fresh {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the authorizer to see the stored policy: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
