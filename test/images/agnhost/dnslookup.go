package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// runDNSLookup resolves its argument through the pod's resolver and prints the
// addresses, comma separated; it fails when the name does not resolve.
func runDNSLookup(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("dns-lookup", stderr)
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for an answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "Usage: agnhost dns-lookup HOSTNAME")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "dns-lookup %s: %v\n", fs.Arg(0), err)
		return 1
	}
	fmt.Fprintln(stdout, strings.Join(addrs, ", "))
	return 0
}
