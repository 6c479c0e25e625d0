// Command release is TestRelease's subject: it maps every page of its executable's
// read-only mappings (as start-up's large folios do), gives them back with
// idlemem.ReleaseExecutable, and reports what stayed in the page cache, pausing for a
// line on stdin after each step so that the test can read its /proc/PID/smaps from
// outside while it runs nothing. Built with cgo, it then calls into C through the
// dynamic linker's relocated tables and starts threads through them.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/idlemem"
)

// informAll keeps client-go's typed clients, informers and listers in the binary
// (ForResource names every one of them), never to be run: pages that the release must
// leave unmapped, as most of a server's are once it is idle. A program as small as this
// one alone fits in the few large folios its own code touches again; with cgo, and the
// preemption signals of a loaded machine, that was a third of it.
func informAll() {
	factory := informers.NewSharedInformerFactory(kubernetes.NewForConfigOrDie(&rest.Config{}), 0)
	for _, arg := range os.Args[2:] {
		if _, err := factory.ForResource(schema.ParseGroupResource(arg).WithVersion("v1")); err != nil {
			fail("%v", err)
		}
	}
	factory.Start(nil)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "inform" {
		informAll()
	}
	stdin := bufio.NewReader(os.Stdin)
	step := func(format string, args ...any) {
		fmt.Printf(format+"\n", args...)
		if _, err := stdin.ReadString('\n'); err != nil {
			os.Exit(4)
		}
	}
	mappings := readOnlyMappings()
	for _, m := range mappings {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m[0], m[1]-m[0], unix.MADV_POPULATE_READ); errno != 0 {
			fail("populate: %v", errno)
		}
	}
	step("populated")
	released, err := idlemem.ReleaseExecutable()
	if err != nil {
		fail("release: %v", err)
	}
	step("released %d", released)
	var cached, pages int
	for _, m := range mappings {
		vec := make([]byte, (m[1]-m[0])/uintptr(os.Getpagesize()))
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, m[0], m[1]-m[0], uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			fail("mincore: %v", errno)
		}
		for _, v := range vec {
			cached += int(v & 1)
		}
		pages += len(vec)
	}
	fmt.Printf("cached %d %d\n", cached, pages)
	if !callC() {
		fail("C returned a wrong pid")
	}
	fmt.Println("ok")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// readOnlyMappings lists the executable's mappings without write permission.
func readOnlyMappings() [][2]uintptr {
	var exe unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &exe); err != nil {
		fail("%v", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		fail("%v", err)
	}
	var out [][2]uintptr
	for line := range bytes.Lines(maps) {
		f := strings.Fields(string(line))
		if len(f) < 5 || f[4] != strconv.FormatUint(exe.Ino, 10) || strings.Contains(f[1], "w") {
			continue
		}
		start, end, _ := strings.Cut(f[0], "-")
		a, _ := strconv.ParseUint(start, 16, 64)
		b, _ := strconv.ParseUint(end, 16, 64)
		out = append(out, [2]uintptr{uintptr(a), uintptr(b)})
	}
	return out
}
