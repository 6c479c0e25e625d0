package storage

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// revisionReadTimeout bounds one shared read of etcd's revision; each caller also
// stops waiting when its own context ends.
const revisionReadTimeout = 10 * time.Second

// revisionReads shares etcd quorum reads of the current revision between concurrent
// callers without weakening what each gets: a caller joins the next read, one that
// starts after the caller arrived, never one already in flight, so the revision it
// gets is at least the one etcd had when it asked (a linearizable read, as if it had
// made its own). Fifty concurrent gets then cost a handful of quorum reads, not fifty.
type revisionReads struct {
	mu      sync.Mutex
	next    *revisionRead // the read the callers arriving now will share
	running bool          // a loop is making reads
}

type revisionRead struct {
	done chan struct{}
	rev  int64
	err  error
}

// current returns etcd's revision as of a quorum read started after the call.
func (r *revisionReads) current(ctx context.Context, client *clientv3.Client) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	r.mu.Lock()
	read := r.next
	if read == nil {
		read = &revisionRead{done: make(chan struct{})}
		r.next = read
	}
	if !r.running {
		r.running = true
		go r.loop(client)
	}
	r.mu.Unlock()
	select {
	case <-read.done:
		return read.rev, read.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// loop makes one read for each batch of callers that arrived while the previous
// read was in flight, and ends when none is waiting.
func (r *revisionReads) loop(client *clientv3.Client) {
	for {
		r.mu.Lock()
		read := r.next
		r.next = nil
		if read == nil {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), revisionReadTimeout)
		resp, err := client.Get(ctx, "/registry/", clientv3.WithCountOnly(), clientv3.WithLimit(1))
		cancel()
		if err == nil {
			read.rev = resp.Header.Revision
		}
		read.err = err
		close(read.done)
	}
}
