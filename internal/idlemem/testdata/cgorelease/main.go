// Command cgorelease is a dynamically linked (cgo) program that gives back its
// executable's pages and then calls into C through the dynamic linker's relocated
// tables, and starts threads (pthread_create, through the same tables). It prints "ok";
// a release that dropped the relocated pages makes it crash instead.
package main

/*
#include <unistd.h>
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"mizzen/internal/idlemem"
)

func main() {
	if int(C.getpid()) != os.Getpid() {
		os.Exit(3)
	}
	if _, err := idlemem.ReleaseExecutable(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // a thread of its own, made and left through libc
			if int(C.getpid()) != os.Getpid() {
				os.Exit(3)
			}
		}()
	}
	wg.Wait()
	fmt.Println("ok")
}
