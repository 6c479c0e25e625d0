// Command dnsutils stands in for the `dig` and `getent` upstream's agnhost image (Alpine's
// bind-tools, musl) and glibc-dns-testing image (Debian's dnsutils, glibc) carry, with the
// subset the conformance suite's DNS probes use. Installed under both names, it acts as
// the one it is called as:
//
//	dig +notcp|+tcp +noall +answer +search NAME [TYPE]   the answer section, one record a line
//	dig +short [+search] NAME [TYPE]                     only the answers' data
//	dig @SERVER -p PORT ...                              another server than resolv.conf's
//	getent hosts NAME                                    "ADDRESS NAME" from /etc/hosts or DNS
//
// As dig, it asks the first nameserver of /etc/resolv.conf (or @SERVER), over UDP unless
// +tcp, and with +search tries NAME with each search domain as a resolver would (ndots);
// as getent, it resolves through Go's resolver (/etc/hosts, then DNS with the search
// list) and exits 2 when NAME is unknown.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"
)

func main() {
	var err error
	switch filepath.Base(os.Args[0]) {
	case "getent":
		err = getent(os.Args[1:])
	default:
		err = dig(os.Args[1:], "/etc/resolv.conf", os.Stdout)
	}
	if err != nil {
		var exit exitCode
		if errors.As(err, &exit) {
			os.Exit(int(exit))
		}
		fmt.Fprintln(os.Stderr, filepath.Base(os.Args[0])+":", err)
		os.Exit(1)
	}
}

// exitCode ends the program with that status and no message.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func getent(args []string) error {
	if len(args) != 2 || args[0] != "hosts" {
		return errors.New("only `getent hosts NAME` is supported")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, args[1])
	if err != nil || len(addrs) == 0 {
		return exitCode(2)
	}
	fmt.Printf("%-15s %s\n", addrs[0], args[1])
	return nil
}

type digOptions struct {
	tcp, search, short, answerOnly bool
	server, port, name             string
	qtype                          uint16
}

func parseDig(args []string) (digOptions, error) {
	o := digOptions{qtype: dns.TypeA}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p" && i+1 < len(args):
			i++
			o.port = args[i]
		case a == "+tcp" || a == "+vc":
			o.tcp = true
		case a == "+notcp" || a == "+novc":
			o.tcp = false
		case a == "+search":
			o.search = true
		case a == "+nosearch":
			o.search = false
		case a == "+short":
			o.short = true
		case a == "+noall":
			o.answerOnly = true
		case strings.HasPrefix(a, "+"):
			// +answer and display options: the answer section is all that is printed.
		case strings.HasPrefix(a, "@"):
			o.server = a[1:]
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 || len(rest) > 2 {
		return o, errors.New("usage: dig [@server] [+options] NAME [TYPE]")
	}
	o.name = rest[0]
	if len(rest) == 2 {
		t, ok := dns.StringToType[strings.ToUpper(rest[1])]
		if !ok {
			return o, fmt.Errorf("unknown type %q", rest[1])
		}
		o.qtype = t
	}
	return o, nil
}

func dig(args []string, resolvConf string, out io.Writer) error {
	o, err := parseDig(args)
	if err != nil {
		return err
	}
	conf, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return err
	}
	server := o.server
	if server == "" {
		if len(conf.Servers) == 0 {
			return errors.New("no nameserver in /etc/resolv.conf")
		}
		server = conf.Servers[0]
	}
	if o.port == "" {
		o.port = conf.Port
	}
	names := []string{dns.Fqdn(o.name)}
	if o.search {
		names = conf.NameList(o.name)
	}
	client := &dns.Client{Timeout: 3 * time.Second}
	if o.tcp {
		client.Net = "tcp"
	}
	var answer []dns.RR
	for _, name := range names {
		msg := new(dns.Msg)
		msg.SetQuestion(name, o.qtype)
		var resp *dns.Msg
		for try := 0; try < 2; try++ {
			if resp, _, err = client.Exchange(msg, net.JoinHostPort(server, o.port)); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf(";; connection timed out; no servers could be reached: %w", err)
		}
		if resp.Rcode == dns.RcodeSuccess && len(resp.Answer) > 0 {
			answer = resp.Answer
			break
		}
	}
	for _, rr := range answer {
		if o.short {
			// The record's data: its text without the header (name, TTL, class, type).
			fmt.Fprintln(out, strings.TrimPrefix(rr.String(), rr.Header().String()))
		} else {
			fmt.Fprintln(out, rr.String())
		}
	}
	return nil
}
