package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// netexec is the state behind netexec's endpoints.
type netexec struct {
	hostname string
	shell    string
	// udpReady is false while an enabled UDP server has not started, or after it ended:
	// /healthz then answers 412, as upstream.
	udpReady atomic.Bool
	// exit ends the process; the HTTP handler calls it after its answer is written.
	exit func(code int)
	// dialTimeout bounds each attempt of /dial.
	dialTimeout time.Duration
}

// runNetexec serves netexec's HTTP endpoints on --http-port and its UDP commands on
// --udp-port until SIGTERM (after --delay-shutdown seconds) or /exit.
func runNetexec(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("netexec", stderr)
	httpPort := fs.Int("http-port", 8080, "HTTP listen port")
	udpPort := fs.Int("udp-port", 8081, "UDP listen port; -1 disables the UDP server")
	sctpPort := fs.Int("sctp-port", -1, "SCTP listen port (not supported here)")
	override := fs.String("http-override", "", "serve this path and query for every request, whatever its URL")
	shell := fs.String("shell", "/bin/sh", "shell that /shell runs commands with")
	delayShutdown := fs.Int("delay-shutdown", 0, "seconds to keep serving after SIGTERM")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *sctpPort != -1 {
		fmt.Fprintln(stderr, "netexec: SCTP is not supported by this build")
		return 2
	}
	hostname, err := os.Hostname()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	n := &netexec{hostname: hostname, shell: *shell, exit: os.Exit, dialTimeout: 5 * time.Second}
	n.udpReady.Store(*udpPort == -1)
	if *udpPort != -1 {
		pc, err := net.ListenPacket("udp", fmt.Sprintf(":%d", *udpPort))
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		n.udpReady.Store(true)
		go func() {
			err := n.serveUDP(pc)
			n.udpReady.Store(false)
			fmt.Fprintln(stderr, "netexec: UDP server ended:", err)
		}()
	}
	var handler http.Handler = n.handler()
	if *override != "" {
		handler = overrideHandler(*override, handler)
	}
	srv := &http.Server{Addr: fmt.Sprintf(":%d", *httpPort), Handler: handler}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		<-sigs
		fmt.Fprintf(stdout, "Received SIGTERM, shutting down in %d seconds\n", *delayShutdown)
		time.Sleep(time.Duration(*delayShutdown) * time.Second)
		os.Exit(0)
	}()
	fmt.Fprintf(stdout, "Started HTTP server on port %d\n", *httpPort)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// overrideHandler serves target (a path with an optional query) for every request.
func overrideHandler(target string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := url.Parse(target)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawQuery = u.Path, u.RawQuery
		next.ServeHTTP(w, r2)
	})
}

func (n *netexec) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "NOW: %v", time.Now())
	})
	mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.RemoteAddr)
	})
	mux.HandleFunc("/echo", n.echo)
	mux.HandleFunc("/exit", n.exitHandler)
	mux.HandleFunc("/shutdown", func(w http.ResponseWriter, r *http.Request) {
		n.exitAfterAnswer(w, 0)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !n.udpReady.Load() {
			http.Error(w, "UDP server is not running", http.StatusPreconditionFailed)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	for _, p := range []string{"/hostname", "/hostName"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, n.hostname) })
	}
	mux.HandleFunc("/redirect", redirect)
	mux.HandleFunc("/shell", n.shellHandler)
	mux.HandleFunc("/dial", n.dial)
	mux.HandleFunc("/bytes", streamBytes)
	return mux
}

// streamBytes answers ?size=N zero bytes, for throughput measurements (mizzen's own
// addition: upstream's netexec has no such endpoint).
func streamBytes(w http.ResponseWriter, r *http.Request) {
	size, err := strconv.ParseInt(r.FormValue("size"), 10, 64)
	if err != nil || size < 0 {
		http.Error(w, "size must be a number of bytes", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	buf := make([]byte, 64<<10)
	for size > 0 {
		chunk := min(size, int64(len(buf)))
		if _, err := w.Write(buf[:chunk]); err != nil {
			return
		}
		size -= chunk
	}
}

// statusParam reads an optional HTTP status code parameter; ok is false (and a 400
// written) when it is malformed.
func statusParam(w http.ResponseWriter, r *http.Request, def int) (int, bool) {
	s := r.FormValue("code")
	if s == "" {
		return def, true
	}
	code, err := strconv.Atoi(s)
	if err != nil || code < 100 || code > 599 {
		http.Error(w, fmt.Sprintf("invalid code %q", s), http.StatusBadRequest)
		return 0, false
	}
	return code, true
}

func (n *netexec) echo(w http.ResponseWriter, r *http.Request) {
	code, ok := statusParam(w, r, http.StatusOK)
	if !ok {
		return
	}
	w.WriteHeader(code)
	fmt.Fprint(w, r.FormValue("msg"))
}

func redirect(w http.ResponseWriter, r *http.Request) {
	location := r.FormValue("location")
	if location == "" {
		http.Error(w, "location is required", http.StatusBadRequest)
		return
	}
	code, ok := statusParam(w, r, http.StatusFound)
	if !ok {
		return
	}
	if code < 300 || code > 399 {
		http.Error(w, fmt.Sprintf("invalid redirect code %d", code), http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, location, code)
}

// exitHandler ends the process with ?code= (0 to 127), after ?wait= if given.
func (n *netexec) exitHandler(w http.ResponseWriter, r *http.Request) {
	code := 0
	if s := r.FormValue("code"); s != "" {
		c, err := strconv.Atoi(s)
		if err != nil || c < 0 || c > 127 {
			http.Error(w, fmt.Sprintf("invalid exit code %q: want an integer in [0, 127]", s), http.StatusBadRequest)
			return
		}
		code = c
	}
	var wait time.Duration
	if s := r.FormValue("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			http.Error(w, fmt.Sprintf("invalid wait %q", s), http.StatusBadRequest)
			return
		}
		wait = d
	}
	time.Sleep(wait)
	n.exitAfterAnswer(w, code)
}

// exitAfterAnswer answers 200 and ends the process once the answer is on its way.
func (n *netexec) exitAfterAnswer(w http.ResponseWriter, code int) {
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		n.exit(code)
	}()
}

// shellHandler runs ?shellCommand= (or ?cmd=) with the shell and answers its output as
// JSON: 200 when it succeeded, 417 with an "error" field when not.
func (n *netexec) shellHandler(w http.ResponseWriter, r *http.Request) {
	command := r.FormValue("shellCommand")
	if command == "" {
		command = r.FormValue("cmd")
	}
	if command == "" {
		http.Error(w, "shellCommand is required", http.StatusBadRequest)
		return
	}
	out, err := exec.CommandContext(r.Context(), n.shell, "-c", command).CombinedOutput()
	result := map[string]string{"output": string(out)}
	code := http.StatusOK
	if err != nil {
		result["error"] = err.Error()
		code = http.StatusExpectationFailed
	}
	writeJSON(w, code, result)
}

// dial sends ?request= to ?host=:?port= over ?protocol= (http or udp) ?tries= times and
// answers the responses and errors as JSON: 200 when the last try succeeded, 417 when
// not, 400 for bad parameters.
func (n *netexec) dial(w http.ResponseWriter, r *http.Request) {
	request, host, port := r.FormValue("request"), r.FormValue("host"), r.FormValue("port")
	protocol := r.FormValue("protocol")
	if protocol == "" {
		protocol = "http"
	}
	tries := 1
	if s := r.FormValue("tries"); s != "" {
		t, err := strconv.Atoi(s)
		if err != nil || t < 1 {
			http.Error(w, fmt.Sprintf("invalid tries %q", s), http.StatusBadRequest)
			return
		}
		tries = t
	}
	if request == "" || host == "" || port == "" {
		http.Error(w, "request, host and port are required", http.StatusBadRequest)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		http.Error(w, fmt.Sprintf("invalid port %q", port), http.StatusBadRequest)
		return
	}
	var send func(context.Context) (string, error)
	addr := net.JoinHostPort(host, port)
	switch protocol {
	case "http":
		send = func(ctx context.Context) (string, error) { return dialHTTP(ctx, addr, request) }
	case "udp":
		send = func(ctx context.Context) (string, error) { return dialUDP(ctx, addr, request) }
	default:
		http.Error(w, fmt.Sprintf("unsupported protocol %q", protocol), http.StatusBadRequest)
		return
	}
	result := map[string][]string{"responses": {}, "errors": {}}
	lastOK := false
	for range tries {
		ctx, cancel := context.WithTimeout(r.Context(), n.dialTimeout)
		resp, err := send(ctx)
		cancel()
		lastOK = err == nil
		if err != nil {
			result["errors"] = append(result["errors"], err.Error())
		} else {
			result["responses"] = append(result["responses"], resp)
		}
	}
	code := http.StatusOK
	if !lastOK {
		code = http.StatusExpectationFailed
	}
	writeJSON(w, code, result)
}

func dialHTTP(ctx context.Context, addr, request string) (string, error) {
	u := "http://" + addr + "/" + strings.TrimPrefix(request, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return string(body), nil
}

func dialUDP(ctx context.Context, addr, request string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte(request)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := conn.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// serveUDP answers the UDP commands hostname, echo MSG and clientip.
func (n *netexec) serveUDP(pc net.PacketConn) error {
	buf := make([]byte, 2048)
	for {
		size, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		if reply := n.udpReply(strings.TrimSpace(string(buf[:size])), from); reply != "" {
			_, _ = pc.WriteTo([]byte(reply), from)
		}
	}
}

func (n *netexec) udpReply(command string, from net.Addr) string {
	switch {
	case command == "hostname":
		return n.hostname
	case strings.HasPrefix(command, "echo "):
		return strings.TrimPrefix(command, "echo ")
	case command == "clientip":
		return from.String()
	}
	return ""
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
