package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

// runServeHostname answers every request with the host's name on --port: over HTTP (the
// default) or, with --http=false, over raw TCP and/or UDP.
func runServeHostname(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve-hostname", stderr)
	port := fs.Int("port", 9376, "port number")
	serveHTTP := fs.Bool("http", true, "serve HTTP")
	serveUDP := fs.Bool("udp", false, "serve UDP")
	serveTCP := fs.Bool("tcp", false, "serve raw TCP (one answer per connection)")
	closeConn := fs.Bool("close", false, "close HTTP connections after each answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *serveHTTP && (*serveTCP || *serveUDP) {
		// As upstream: raw TCP and UDP are served with --http=false.
		fmt.Fprintln(stderr, "serve-hostname: --http cannot be given with --tcp or --udp (use --http=false)")
		return 2
	}
	if !*serveHTTP && !*serveUDP && !*serveTCP {
		fmt.Fprintln(stderr, "serve-hostname: nothing to serve; set --http, --udp or --tcp")
		return 2
	}
	hostname, err := os.Hostname()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	addr := ":" + strconv.Itoa(*port)
	errs := make(chan error, 3)
	if *serveUDP {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		go func() { errs <- serveHostnameUDP(pc, hostname) }()
	}
	if *serveTCP {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		go func() { errs <- serveHostnameTCP(l, hostname) }()
	}
	if *serveHTTP {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		go func() { errs <- http.Serve(l, hostnameHandler(hostname, *closeConn)) }()
	}
	fmt.Fprintf(stdout, "Serving %s on port %d\n", hostname, *port)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case sig := <-sigs:
		fmt.Fprintf(stdout, "Received %s, exiting\n", sig)
		return 0
	case err := <-errs:
		fmt.Fprintln(stderr, err)
		return 1
	}
}

// hostnameHandler answers any HTTP request with the hostname.
func hostnameHandler(hostname string, closeConn bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if closeConn {
			w.Header().Set("Connection", "close")
		}
		fmt.Fprint(w, hostname)
	})
}

func serveHostnameUDP(pc net.PacketConn, hostname string) error {
	buf := make([]byte, 1024)
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		if _, err := pc.WriteTo([]byte(hostname), from); err != nil {
			return err
		}
	}
}

func serveHostnameTCP(l net.Listener, hostname string) error {
	for {
		conn, err := l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		go func() {
			defer conn.Close()
			_, _ = conn.Write([]byte(hostname))
		}()
	}
}
