package main

import (
	"fmt"
	"io"
	"strconv"
)

// runFail exits with the code given as its argument (1 without one): a container that
// crashes on purpose.
func runFail(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("fail", stderr)
	code := fs.Int("exit-code", 1, "exit code")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		n, err := strconv.Atoi(fs.Arg(0))
		if err != nil || n < 0 || n > 255 {
			fmt.Fprintf(stderr, "fail: exit code %q is not an integer in [0, 255]\n", fs.Arg(0))
			return 2
		}
		*code = n
	}
	fmt.Fprintf(stderr, "failing with exit code %d\n", *code)
	return *code
}
