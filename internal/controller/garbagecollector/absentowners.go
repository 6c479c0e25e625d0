package garbagecollector

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// absentOwnersSize bounds the cache, as upstream's absent owner cache (500).
const absentOwnersSize = 500

// absentOwners remembers owners a live GET found gone, by namespace and UID, so that
// the other dependents of a deleted owner (the hundred pods of a deleted ReplicaSet)
// are collected without a GET each. A UID is never reused, so an owner once gone
// stays gone; the namespace is part of the key because a namespaced owner is looked
// up in its dependent's namespace. The oldest entry goes first when it is full.
type absentOwners struct {
	mu    sync.Mutex
	set   map[absentOwner]struct{}
	order []absentOwner // a ring of the keys in set, oldest at next
	next  int
}

type absentOwner struct {
	namespace string
	uid       types.UID
}

func newAbsentOwners() *absentOwners {
	return &absentOwners{set: make(map[absentOwner]struct{}, absentOwnersSize)}
}

func (a *absentOwners) has(namespace string, uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.set[absentOwner{namespace, uid}]
	return ok
}

func (a *absentOwners) add(namespace string, uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := absentOwner{namespace, uid}
	if _, ok := a.set[k]; ok {
		return
	}
	if len(a.order) < absentOwnersSize {
		a.order = append(a.order, k)
	} else {
		delete(a.set, a.order[a.next])
		a.order[a.next] = k
		a.next = (a.next + 1) % absentOwnersSize
	}
	a.set[k] = struct{}{}
}
