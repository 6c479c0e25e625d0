// Command agnhost is mizzen's own build of the test tool upstream's e2e tests run in
// their pods: one static binary whose subcommands (serve-hostname, netexec, dns-lookup,
// pause, fail, liveness, stress, resource-consumer, webhook, crd-conversion-webhook,
// csi-hostpath) behave as upstream's agnhost subcommands of the same
// name, so that tests written against upstream's image read the same here.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// subcommand is one agnhost tool: it parses its own flags from args and returns the
// process exit code.
type subcommand struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func subcommands() map[string]subcommand {
	return map[string]subcommand{
		"serve-hostname":         {"serve the pod's hostname over HTTP, UDP or TCP on --port (9376)", runServeHostname},
		"netexec":                {"HTTP server on --http-port (8080) with /hostname, /echo, /healthz, /dial, /shell, /exit, /clientip", runNetexec},
		"dns-lookup":             {"resolve a name and print its addresses", runDNSLookup},
		"pause":                  {"sleep until SIGTERM or SIGINT, then exit 0", runPause},
		"fail":                   {"exit at once with the given code (default 1)", runFail},
		"liveness":               {"serve /healthz on :8080, healthy for 10 seconds and failing after", runLiveness},
		"stress":                 {"allocate memory (--mem-total) in steps, then hold it", runStress},
		"resource-consumer":      {"HTTP server on --port (8080) with /ConsumeCPU?millicores=N&durationSec=S and /ConsumeMem?megabytes=N&durationSec=S", runResourceConsumer},
		"csi-hostpath":           {"a CSI node plugin publishing directories of --root by bind mount, registered through the kubelet's plugins_registry", runCSIHostPath},
		"crd-conversion-webhook": {"ConversionReview v1 over TLS on /crdconvert (--tls-cert-file, --tls-private-key-file, --port 443): stable.example.com v1 hostPort <-> v2 host and port", runCRDConversionWebhook},
		"webhook":                {"admission webhooks over TLS (--tls-cert-file, --tls-private-key-file, --port 443): /always-deny, /add-label, /pods, /configmaps, /mutating-pods, ...", runWebhook},
	}
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	cmds := subcommands()
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		usage(stderr, cmds)
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "agnhost: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]subcommand) {
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "Usage: agnhost COMMAND [flags]")
	for _, name := range names {
		fmt.Fprintf(w, "  %-15s %s\n", name, cmds[name].summary)
	}
}

// newFlags is a flag set that reports errors to stderr instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
