//go:build cgo

package main

/*
#include <unistd.h>
*/
import "C"

import (
	"os"
	"runtime"
	"sync"
)

// callC calls getpid through the PLT, from this thread and from new ones (made and
// left through libc's pthread functions).
func callC() bool {
	ok := int(C.getpid()) == os.Getpid()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // this goroutine's thread exits with it
			same := int(C.getpid()) == os.Getpid()
			mu.Lock()
			ok = ok && same
			mu.Unlock()
		}()
	}
	wg.Wait()
	return ok
}
