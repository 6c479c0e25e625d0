package flowcontrol

import (
	"context"
	"sync/atomic"
)

// A watch holds a seat of its level while it is initialized, as upstream's: from its
// admission until its handler has sent the events it starts with (the objects that
// exist, or the changes since the version it asked for). That is the part of a watch
// that costs the server like a list; what follows lasts as long as the client stays
// and costs little, so it holds nothing. The filter puts a watchInit in the watch's
// context and the watch handler calls WatchInitialized once those events are written;
// a handler that returns before (an error) frees the seat as it returns.

type watchInitKey struct{}

// watchInit frees a watch's seat once.
type watchInit struct {
	done    atomic.Bool
	release func()
}

func (w *watchInit) signal() {
	if w.done.CompareAndSwap(false, true) {
		w.release()
	}
}

// withWatchInit is ctx carrying the signal that frees the watch's seat.
func withWatchInit(ctx context.Context, w *watchInit) context.Context {
	return context.WithValue(ctx, watchInitKey{}, w)
}

// WatchInitialized tells API Priority and Fairness that the watch served under ctx has
// sent its initial events, so that its seat goes to others. It does nothing for a
// request that holds no watch seat (priority and fairness off, an unclassified
// request), and after the first call.
func WatchInitialized(ctx context.Context) {
	if w, ok := ctx.Value(watchInitKey{}).(*watchInit); ok {
		w.signal()
	}
}
