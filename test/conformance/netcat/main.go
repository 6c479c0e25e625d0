// Command netcat stands in for the netcat-openbsd upstream's agnhost image carries
// (busybox's nc has no -v, -t, -u, -z or -W), with the subset of its flags the
// conformance suite's probes use:
//
//	echo hostName | nc -v -t -w 2 HOST PORT     TCP: send stdin, print the answer
//	echo hostName | nc -w 1 -W 1 -u -p 1234 HOST PORT   UDP: send, print up to 1 datagram
//	nc -vz -w 5 HOST PORT                       only check that a TCP connection opens
//
// As netcat-openbsd: -w bounds the connection attempt and how long the connection
// may stay idle; UDP always waits -w for answers unless -W answers arrived; failing
// to connect exits 1, with the reason on stderr under -v.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

type options struct {
	verbose, zero, udp bool
	wait               time.Duration
	packets            int
	srcPort            int
	host, port         string
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nc:", err)
		fmt.Fprintln(os.Stderr, "usage: nc [-tuvz] [-w timeout] [-W recvlimit] [-p source_port] destination port")
		os.Exit(1)
	}
	if err := run(o); err != nil {
		if o.verbose {
			fmt.Fprintln(os.Stderr, "nc:", err)
		}
		os.Exit(1)
	}
}

// parse reads flags in getopt's manner: clustered (-vz), with values attached (-w2)
// or following (-w 2), until the two positional arguments.
func parse(args []string) (options, error) {
	var o options
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			switch c := a[j]; c {
			case 'v':
				o.verbose = true
			case 'z':
				o.zero = true
			case 'u':
				o.udp = true
			case 't', 'n', 'N':
			case 'w', 'W', 'p':
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						return o, fmt.Errorf("option requires an argument -- '%c'", c)
					}
					i++
					val = args[i]
				}
				n, err := strconv.Atoi(val)
				if err != nil || n < 0 {
					return o, fmt.Errorf("invalid value %q for -%c", val, c)
				}
				switch c {
				case 'w':
					o.wait = time.Duration(n) * time.Second
				case 'W':
					o.packets = n
				case 'p':
					o.srcPort = n
				}
				j = len(a)
			default:
				return o, fmt.Errorf("invalid option -- '%c'", c)
			}
		}
	}
	if len(rest) != 2 {
		return o, errors.New("need a destination and a port")
	}
	o.host, o.port = rest[0], rest[1]
	return o, nil
}

func run(o options) error {
	network := "tcp"
	if o.udp {
		network = "udp"
	}
	d := net.Dialer{Timeout: o.wait}
	if o.srcPort > 0 {
		if o.udp {
			d.LocalAddr = &net.UDPAddr{Port: o.srcPort}
		} else {
			d.LocalAddr = &net.TCPAddr{Port: o.srcPort}
		}
	}
	conn, err := d.Dial(network, net.JoinHostPort(o.host, o.port))
	if err != nil {
		return fmt.Errorf("connect to %s port %s (%s) failed: %w", o.host, o.port, network, err)
	}
	defer conn.Close()
	if o.verbose {
		fmt.Fprintf(os.Stderr, "Connection to %s %s port [%s/*] succeeded!\n", o.host, o.port, network)
	}
	if o.zero {
		return nil
	}
	go func() {
		_, _ = io.Copy(conn, os.Stdin)
	}()
	return receive(conn, o)
}

// receive copies what arrives to stdout until the peer closes, -W datagrams have
// arrived, or nothing arrived for -w (forever without -w, as netcat).
func receive(conn net.Conn, o options) error {
	buf := make([]byte, 64<<10)
	for got := 0; o.packets == 0 || got < o.packets; got++ {
		if o.wait > 0 {
			_ = conn.SetReadDeadline(time.Now().Add(o.wait))
		}
		n, err := conn.Read(buf)
		if n > 0 {
			_, _ = os.Stdout.Write(buf[:n])
		}
		var ne net.Error
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.As(err, &ne) && ne.Timeout():
			return nil
		case o.udp:
			// netcat-openbsd reports a refused datagram under -v and still exits 0 on reads.
			return nil
		default:
			return err
		}
	}
	return nil
}
