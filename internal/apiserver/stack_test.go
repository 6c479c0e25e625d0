package apiserver

import (
	"net/http/httptest"
	"testing"
	"unsafe"
)

// deepFrame needs a frame of 20 KiB, more than a new goroutine's stack holds.
//
//go:noinline
func deepFrame(n int) byte {
	var b [20 << 10]byte
	b[n%len(b)] = byte(n)
	return b[(n*3)%len(b)]
}

// readFrame needs a frame of 10 KiB, as much as a get's path grew the stack by.
//
//go:noinline
func readFrame(n int) byte {
	var b [10 << 10]byte
	b[n%len(b)] = byte(n)
	return b[(n*3)%len(b)]
}

// stackAddr is the address of a local of its caller's frame, as a number, so that
// the local stays on the stack.
//
//go:noinline
func stackAddr(p *int) uintptr { return uintptr(unsafe.Pointer(p)) }

// TestGrowStack checks that after growStack a 20 KiB frame, and after
// growStackForRead a 10 KiB one, fits on the stack as it is: the stack is not copied
// (which moves its locals), and without the growth it is.
func TestGrowStack(t *testing.T) {
	moved := func(grow func(int) byte, frame func(int) byte) bool {
		done := make(chan bool)
		go func() {
			if grow != nil {
				grow(len("POST"))
			}
			var local int
			before := stackAddr(&local)
			frame(local)
			done <- stackAddr(&local) != before
		}()
		return <-done
	}
	for _, c := range []struct {
		name        string
		grow, frame func(int) byte
	}{
		{"growStack", growStack, deepFrame},
		{"growStackForRead", growStackForRead, readFrame},
	} {
		if moved(c.grow, c.frame) {
			t.Errorf("the stack was copied after %s", c.name)
		}
		if !moved(nil, c.frame) {
			t.Logf("a new goroutine's stack already holds %s's frame: nothing to check", c.name)
		}
	}
}

// TestMayWatch checks which GETs keep a small stack: every watch, and nothing else
// but a list that mentions watch.
func TestMayWatch(t *testing.T) {
	for target, want := range map[string]bool{
		"/api/v1/namespaces/default/pods/p":                   false,
		"/api/v1/pods?limit=500":                              false,
		"/api/v1/pods?watch=true&resourceVersion=5":           true,
		"/api/v1/pods?allowWatchBookmarks=true&watch=1":       true,
		"/api/v1/watch/namespaces/default/pods":               true,
		"/apis/apps/v1/deployments?labelSelector=app%3Dwatch": true,
	} {
		if got := mayWatch(httptest.NewRequest("GET", target, nil)); got != want {
			t.Errorf("mayWatch(%s) = %v, want %v", target, got, want)
		}
	}
}
