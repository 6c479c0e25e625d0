// Command sh is /bin/sh in the conformance harness's busybox image. Debian's busybox
// (1.35) ash drops environment variables whose names are not shell identifiers
// (`data-1`, `1-prefix`) before it runs a command, while upstream's busybox image
// (1.37) passes them on; the suite's specs print the environment with `sh -c env` and
// look for them. So a script that is one plain word (a command without arguments,
// quotes, expansions or operators) is run directly with the environment unchanged, as
// a shell would run it; anything else is busybox's ash, unchanged.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

const busybox = "/bin/busybox"

func main() {
	args := os.Args[1:]
	if len(args) == 2 && args[0] == "-c" && plainWord(args[1]) {
		if path, err := exec.LookPath(args[1]); err == nil {
			err = syscall.Exec(path, []string{args[1]}, os.Environ())
			fmt.Fprintf(os.Stderr, "sh: %s: %v\n", args[1], err)
			os.Exit(126)
		}
	}
	err := syscall.Exec(busybox, append([]string{shellName(os.Args[0])}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "sh: %s: %v\n", busybox, err)
	os.Exit(127)
}

// shellName is the argv[0] busybox gets: the name this program was run by when it is
// sh, so ash's messages begin as upstream's image's do ("/bin/sh: can't create ..."
// when run as /bin/sh), and busybox still picks its sh applet from the base name.
func shellName(arg0 string) string {
	if filepath.Base(arg0) == "sh" {
		return arg0
	}
	return "sh"
}

// plainWord: the script is one command name a shell would look up in PATH as it is.
func plainWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
