package apiserver

import (
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

// stackAddr is the address of a local of its caller's frame, as a number, so that
// the local stays on the stack.
//
//go:noinline
func stackAddr(p *int) uintptr { return uintptr(unsafe.Pointer(p)) }

// TestGrowStack checks that after growStack a 20 KiB frame fits on the stack as it
// is: the stack is not copied (which moves its locals), and without the growth it is.
func TestGrowStack(t *testing.T) {
	moved := func(grow bool) bool {
		done := make(chan bool)
		go func() {
			if grow {
				growStack(len("POST"))
			}
			var local int
			before := stackAddr(&local)
			deepFrame(local)
			done <- stackAddr(&local) != before
		}()
		return <-done
	}
	if moved(true) {
		t.Error("the stack was copied for a 20 KiB frame after growStack")
	}
	if !moved(false) {
		t.Skip("a new goroutine's stack already holds 20 KiB: nothing to check")
	}
}
