package storage

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Store reads and writes single objects in etcd.
type Store struct {
	client    *clientv3.Client
	revisions revisionReads
	// cache is the watch cache made by NewCache (the latest, if several), told of
	// this store's puts so that it need not decode them again.
	cache atomic.Pointer[Cache]
}

// NewStore returns a Store over an etcd client.
func NewStore(client *clientv3.Client) *Store { return &Store{client: client} }

// NewCache returns a watch cache of the resources, fed from the store's etcd.
func (s *Store) NewCache(resources []ResourceConfig, log *slog.Logger) *Cache {
	c := NewCache(s.client, resources, log)
	s.cache.Store(c)
	return c
}

// setRV stamps obj with the revision it was stored at.
func setRV(obj runtime.Object, rev int64) {
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetResourceVersion(fmt.Sprint(rev))
	}
}

// encodeForStore encodes obj without its resourceVersion, which etcd tracks itself.
func encodeForStore(obj runtime.Object) ([]byte, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := acc.GetResourceVersion()
	acc.SetResourceVersion("")
	data, err := Encode(obj)
	acc.SetResourceVersion(rv)
	return data, err
}

// Create writes obj at key if nothing is there; obj's resourceVersion is set to the new
// revision.
func (s *Store) Create(ctx context.Context, key string, obj runtime.Object) error {
	_, err := s.CreateEntry(ctx, key, obj)
	return err
}

// CreateEntry is Create that also returns the watch cache's entry of the object it
// stored, made from the bytes it stored, or nil where the cache keeps the resource
// otherwise. The entry's protobuf encoding is the object as a response carries it,
// and the cache takes the same entry when the put's event comes back.
func (s *Store) CreateEntry(ctx context.Context, key string, obj runtime.Object) (*Entry, error) {
	data, err := encodeForStore(obj)
	if err != nil {
		return nil, err
	}
	resp, put, err := s.putAt(ctx, key, 0, data, obj)
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, keyErr(ErrAlreadyExists, key, "")
	}
	setRV(obj, resp.Header.Revision)
	return put.builtEntry(key, resp.Header.Revision), nil
}

// putAt puts data, obj's storage encoding, at key if the key was last modified at rev
// (0: it holds nothing). The watch cache is told of the put first, so that it builds
// the entry from data rather than decode it again, and forgets it unless the put
// succeeded.
func (s *Store) putAt(ctx context.Context, key string, rev int64, data []byte, obj runtime.Object) (*clientv3.TxnResponse, *written, error) {
	cache := s.cache.Load()
	put := cache.expectPut(key, data, obj)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, bytesString(data))).
		Commit()
	if err != nil || !resp.Succeeded {
		cache.forgetPut(key, put)
	}
	return resp, put, err
}

// Get reads the object at key into into (an empty object of the stored type).
func (s *Store) Get(ctx context.Context, key string, into runtime.Object) error {
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return keyErr(ErrNotFound, key, "")
	}
	kv := resp.Kvs[0]
	if err := Decode(kv.Value, into); err != nil {
		return fmt.Errorf("decoding %s: %w", key, err)
	}
	setRV(into, kv.ModRevision)
	return nil
}

// UpdateFunc computes the object to store from the current one (which it may modify).
// Returning a nil object deletes the key; returning ErrConflict or any other error
// aborts the update with that error.
type UpdateFunc func(current runtime.Object) (runtime.Object, error)

// GuaranteedUpdate applies update to the object at key and writes the result if the
// key has not changed in between, retrying from a fresh read when it has. newObj
// returns an empty object of the stored type. When the result encodes the same as
// what is stored, nothing is written and the current object is returned. The returned
// bool says whether the object was deleted.
//
// The first attempt starts, as upstream's does, from the watch cache's copy when it
// has one: the compare-and-put fails if the copy was stale, and every later attempt
// starts from etcd. An update that fails on the cache's copy is retried on etcd's, so
// that no error is judged on a stale object.
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, newObj func() runtime.Object, update UpdateFunc) (runtime.Object, bool, error) {
	current, rev := s.cache.Load().latestCopy(key, newObj)
	fromCache := current != nil
	var stored *mvccpb.KeyValue // etcd's value at rev, when read from etcd
	for {
		if current == nil {
			if stored == nil {
				resp, err := s.client.Get(ctx, key)
				if err != nil {
					return nil, false, err
				}
				if len(resp.Kvs) == 0 {
					return nil, false, keyErr(ErrNotFound, key, "")
				}
				stored = resp.Kvs[0]
			}
			current, rev = newObj(), stored.ModRevision
			if err := Decode(stored.Value, current); err != nil {
				return nil, false, fmt.Errorf("decoding %s: %w", key, err)
			}
		}
		setRV(current, rev)
		updated, err := update(current)
		if err != nil {
			if fromCache {
				current, stored, fromCache = nil, nil, false
				continue
			}
			return nil, false, err
		}
		if updated == nil {
			tx, err := s.client.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
				Then(clientv3.OpDelete(key)).
				Commit()
			if err != nil {
				return nil, false, err
			}
			if !tx.Succeeded {
				current, stored, fromCache = nil, nil, false
				continue
			}
			setRV(current, tx.Header.Revision)
			return current, true, nil
		}
		data, err := encodeForStore(updated)
		if err != nil {
			return nil, false, err
		}
		if stored != nil && string(data) == string(stored.Value) {
			setRV(updated, rev)
			return updated, false, nil
		}
		// Unless the value is what we would put (nothing to write), put it if the key
		// is still at rev; otherwise read what is there, in the same transaction.
		cache := s.cache.Load()
		put := cache.expectPut(key, data, updated)
		tx, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev), clientv3.Compare(clientv3.Value(key), "!=", bytesString(data))).
			Then(clientv3.OpPut(key, bytesString(data))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil || !tx.Succeeded {
			cache.forgetPut(key, put)
		}
		if err != nil {
			return nil, false, err
		}
		if tx.Succeeded {
			setRV(updated, tx.Header.Revision)
			return updated, false, nil
		}
		kvs := tx.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil, false, keyErr(ErrNotFound, key, "")
		}
		if kvs[0].ModRevision == rev && string(kvs[0].Value) == string(data) {
			// Unchanged: the stored object is the result (as of rev).
			setRV(updated, rev)
			return updated, false, nil
		}
		// Changed meanwhile: start again from what etcd just said.
		current, stored, fromCache = nil, kvs[0], false
	}
}

// CurrentRevision is etcd's latest revision: a consistent read must see at least it.
// Concurrent callers share reads (see revisionReads).
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	return s.revisions.current(ctx, s.client)
}

// ListPage reads up to limit objects that keep accepts (all when limit is 0), with keys
// in [start, end), at revision rev (the latest when 0). It returns them with their
// resource versions, the revision read, and, when more keys follow, the last key
// looked at (a continuation resumes just after it) and how many keys follow the page.
func (s *Store) ListPage(ctx context.Context, start, end string, rev int64, limit int64, newObj func() runtime.Object, keep func(runtime.Object) bool) (objs []runtime.Object, readRev int64, lastKey string, remaining int64, err error) {
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		if limit > 0 {
			opts = append(opts, clientv3.WithLimit(limit-int64(len(objs))))
		}
		resp, err := s.client.Get(ctx, start, opts...)
		if err != nil {
			if strings.Contains(err.Error(), "required revision has been compacted") {
				return nil, 0, "", 0, keyErr(ErrExpired, start, "")
			}
			return nil, 0, "", 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			obj := newObj()
			if err := Decode(kv.Value, obj); err != nil {
				return nil, 0, "", 0, fmt.Errorf("decoding %s: %w", kv.Key, err)
			}
			setRV(obj, kv.ModRevision)
			if keep == nil || keep(obj) {
				objs = append(objs, obj)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return objs, rev, "", 0, nil
		}
		lastKey = string(resp.Kvs[len(resp.Kvs)-1].Key)
		if limit > 0 && int64(len(objs)) >= limit {
			// etcd counts every key in the range: those past the page remain.
			return objs, rev, lastKey, resp.Count - int64(len(resp.Kvs)), nil
		}
		start = lastKey + "\x00"
	}
}
