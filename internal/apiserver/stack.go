package apiserver

import (
	"net/http"
	"strings"
)

// A request's goroutine starts with a small stack, and growing a stack copies every
// frame on it. A create or update decodes its body deep in the handler chain, and the
// generated protobuf decoders of the big kinds (a pod's containers) have frames of
// kilobytes: letting them grow the stack there, through the whole chain's frames, took
// 8.5% of the CPU of a run of pod creates (bench/apiserver -cpuprofile), about as much
// as decoding them. Growing it once at the top of a write, where few frames sit on it,
// to the 32 KiB a create needs took 2% (BENCHMARKS.md, perf10).

// growStack needs a frame of 28 KiB, which grows the calling goroutine's stack to
// 32 KiB (the runtime doubles it until the frame fits): the check at a function's
// entry is against its whole frame. The frame's array is only declared, and so
// zeroed, on a path that never runs for n >= 0 (the callers pass a length): zeroing
// 28 KiB on every write cost about as much as growing the stack itself.
//
//go:noinline
func growStack(n int) byte {
	if n >= 0 {
		return 0
	}
	var reserve [28 << 10]byte
	reserve[-n%len(reserve)] = byte(n)
	return reserve[(-n*7)%len(reserve)]
}

// growStackForRead needs a frame of 12 KiB, which grows the calling goroutine's stack
// to the 16 KiB a get or a list reaches (authorizing it grew the stack there, through
// the chain's frames: ~4% of the CPU of a run of pod gets), the same way growStack
// does for writes.
//
//go:noinline
func growStackForRead(n int) byte {
	if n >= 0 {
		return 0
	}
	var reserve [12 << 10]byte
	reserve[-n%len(reserve)] = byte(n)
	return reserve[(-n*7)%len(reserve)]
}

// mayWatch says whether a GET could be a watch, cheaply, before the request is
// parsed: a watch parameter or a /watch/ path. A list whose selector merely mentions
// "watch" is taken for one and keeps the small stack.
func mayWatch(r *http.Request) bool {
	return strings.Contains(r.URL.RawQuery, "watch") || strings.Contains(r.URL.Path, "/watch/")
}
