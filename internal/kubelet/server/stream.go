package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The streams of exec and attach arrive in one of two protocols and leave in one.
//
// containerd's CRI streaming server speaks SPDY (and only websocket protocols older than
// kubectl's), while kubectl speaks WebSocket v5.channel.k8s.io first for exec and
// attach, and SPDY tunnelled inside a WebSocket for port-forward. SPDY requests are
// proxied to the runtime byte for byte. WebSocket requests are translated here, in the
// kubelet, rather than in the apiserver: the kubelet is the one component that knows
// which protocols its runtime speaks, and the apiserver stays a plain authenticated
// proxy for every node.

// streamOptions are the streams an exec or attach session asks for.
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

func streamOptionsFromQuery(r *http.Request) streamOptions {
	q := r.URL.Query()
	o := streamOptions{
		stdin:  parseBool(q.Get("stdin")) || parseBool(q.Get("input")),
		stdout: parseBool(q.Get("stdout")) || parseBool(q.Get("output")),
		stderr: parseBool(q.Get("stderr")) || parseBool(q.Get("error")),
		tty:    parseBool(q.Get("tty")),
	}
	if o.tty {
		// A terminal merges stderr into stdout; there is no separate stream.
		o.stderr = false
	}
	return o
}

func (o streamOptions) validate() error {
	if !o.stdin && !o.stdout && !o.stderr {
		return apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	return nil
}

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) {
	command := r.URL.Query()["command"]
	if len(command) == 0 {
		writeStatus(w, apierrors.NewBadRequest("you must specify at least one command for the container"))
		return
	}
	s.serveRemoteCommand(w, r, "exec in", nil, func(ctx context.Context, id string, o streamOptions) (string, error) {
		resp, err := s.runtime.Exec(ctx, &runtimeapi.ExecRequest{
			ContainerId: id, Cmd: command, Tty: o.tty, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr,
		})
		return resp.GetUrl(), err
	})
}

func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) {
	s.serveRemoteCommand(w, r, "attach to", s.attachTTY, func(ctx context.Context, id string, o streamOptions) (string, error) {
		resp, err := s.runtime.Attach(ctx, &runtimeapi.AttachRequest{
			ContainerId: id, Tty: o.tty, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr,
		})
		return resp.GetUrl(), err
	})
}

// attachTTY gives an attach session the TTY setting of the container's spec, as
// upstream's kubelet does: whether the process runs on a terminal was fixed when it
// started. A client whose stdin is not a terminal (kubectl run -it < file) asks for no
// TTY; passed on to a TTY container, the runtime (containerd 1.6) would wait on a
// stderr that never ends, and the session would outlive the container.
func (s *Server) attachTTY(namespace, pod, container string, o streamOptions) streamOptions {
	for _, p := range s.opts.Pods() {
		if p.Namespace != namespace || p.Name != pod {
			continue
		}
		if tty, ok := containerTTY(p, container); ok {
			o.tty = tty
			if o.tty {
				o.stderr = false // a terminal merges stderr into stdout
			}
			return o
		}
	}
	return o
}

// containerTTY reports whether the pod's container of that name, of any kind, runs
// on a terminal; ok is false when the pod has no such container.
func containerTTY(p *v1.Pod, name string) (tty, ok bool) {
	for _, c := range append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == name {
			return c.TTY, true
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == name {
			return c.TTY, true
		}
	}
	return false, false
}

// serveRemoteCommand serves exec and attach alike: it checks the stream options, finds
// the running container, asks the runtime for its streaming URL (streamURL) and proxies
// the client's stream to it. verb words the error ("exec in", "attach to"); adjust,
// if set, corrects the options the client asked for (attachTTY).
func (s *Server) serveRemoteCommand(w http.ResponseWriter, r *http.Request, verb string,
	adjust func(namespace, pod, container string, o streamOptions) streamOptions,
	streamURL func(ctx context.Context, containerID string, o streamOptions) (string, error)) {
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts := streamOptionsFromQuery(r)
	if adjust != nil {
		opts = adjust(ns, pod, container, opts)
	}
	if err := opts.validate(); err != nil {
		writeStatus(w, err)
		return
	}
	c, err := s.findRunningContainer(r.Context(), ns, pod, container)
	if err != nil {
		writeStatus(w, err)
		return
	}
	url, err := streamURL(r.Context(), c.Id, opts)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("%s container %q of pod %q: %w", verb, container, pod, err)))
		return
	}
	s.proxyRemoteCommand(w, r, url, opts)
}

func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	ns, pod := r.PathValue("namespace"), r.PathValue("pod")
	sb, err := s.findSandbox(r.Context(), ns, pod)
	if err != nil {
		writeStatus(w, err)
		return
	}
	resp, err := s.runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sb.Id})
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("port-forward to pod %q: %w", pod, err)))
		return
	}
	target, err := url.Parse(resp.Url)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	switch {
	case wsstream.IsWebSocketRequestWithTunnelingProtocol(r):
		s.tunnelPortForward(w, r, target)
	case wsstream.IsWebSocketRequest(r):
		writeStatus(w, apierrors.NewBadRequest("port-forward over WebSocket needs the SPDY/3.1+portforward.k8s.io tunnelling protocol"))
	default:
		s.proxyUpgrade(w, r, target)
	}
}

// proxyRemoteCommand hands an exec or attach session to the runtime's streaming URL.
func (s *Server) proxyRemoteCommand(w http.ResponseWriter, r *http.Request, streamURL string, opts streamOptions) {
	target, err := url.Parse(streamURL)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	if wsstream.IsWebSocketRequest(r) {
		s.translateRemoteCommand(w, r, target, opts)
		return
	}
	s.proxyUpgrade(w, r, target)
}

// proxyUpgrade passes an SPDY upgrade through to the runtime unchanged.
func (s *Server) proxyUpgrade(w http.ResponseWriter, r *http.Request, target *url.URL) {
	h := proxy.NewUpgradeAwareHandler(target, nil, false, true, errorResponder{s})
	h.ServeHTTP(w, r)
}

type errorResponder struct{ s *Server }

func (e errorResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	e.s.log.Debug("proxying a stream to the runtime", "err", err)
	writeStatus(w, apierrors.NewInternalError(err))
}

// Channels of the WebSocket remote command protocols, in channel-number order.
var remoteCommandChannels = []wsstream.ChannelType{
	wsstream.ReadChannel,  // 0: stdin
	wsstream.WriteChannel, // 1: stdout
	wsstream.WriteChannel, // 2: stderr
	wsstream.WriteChannel, // 3: error (the final Status)
	wsstream.ReadChannel,  // 4: terminal resize
}

// translateRemoteCommand serves a WebSocket exec or attach session (v5.channel.k8s.io or
// v4.channel.k8s.io) by running it against the runtime over SPDY.
func (s *Server) translateRemoteCommand(w http.ResponseWriter, r *http.Request, target *url.URL, opts streamOptions) {
	protocols := map[string]wsstream.ChannelProtocolConfig{}
	// The older protocols (channel.k8s.io up to v3) remain upstream's too: their error
	// channel carries only a failure, as text, where v4 and v5 send a Status.
	for _, p := range []string{"v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"} {
		protocols[p] = wsstream.ChannelProtocolConfig{Binary: true, Channels: remoteCommandChannels}
	}
	for _, p := range []string{"v4.base64.channel.k8s.io", "base64.channel.k8s.io"} {
		protocols[p] = wsstream.ChannelProtocolConfig{Binary: false, Channels: remoteCommandChannels}
	}
	conn := wsstream.NewConn(protocols)
	protocol, channels, err := conn.Open(w, r)
	finish := func(w io.Writer, err error) {
		if strings.HasPrefix(protocol, "v4.") || strings.HasPrefix(protocol, "v5.") {
			writeExitStatus(w, err)
		} else if err != nil {
			_, _ = w.Write([]byte(err.Error()))
		}
	}
	if err != nil {
		// The handshake has answered the client already.
		s.log.Debug("websocket handshake", "err", err)
		return
	}
	defer conn.Close()
	// The session ends when the client goes: the resize channel, which clients never
	// close on their own, reaches its end only when the WebSocket does. Without this an
	// attach whose client vanished would hold its runtime stream until the container
	// exits.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	resize := &resizeQueue{r: channels[4], onEnd: cancel}
	executor, err := remotecommand.NewSPDYExecutor(&rest.Config{}, http.MethodPost, target)
	if err != nil {
		finish(channels[3], err)
		return
	}
	so := remotecommand.StreamOptions{Tty: opts.tty}
	if opts.stdin {
		so.Stdin = channels[0]
	}
	if opts.stdout {
		so.Stdout = channels[1]
	}
	if opts.stderr {
		so.Stderr = channels[2]
	}
	if opts.tty {
		so.TerminalSizeQueue = resize
	} else {
		go resize.drain()
	}
	err = executor.StreamWithContext(ctx, so)
	finish(channels[3], err)
}

// writeExitStatus writes the session's outcome to the error channel as the v4 and v5
// protocols define it: a Status, with the exit code as a cause when the command failed.
func writeExitStatus(w io.Writer, err error) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	var exitErr utilexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.Exited():
		rc := exitErr.ExitStatus()
		st = metav1.Status{
			TypeMeta: st.TypeMeta, Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
			Message: fmt.Sprintf("command terminated with non-zero exit code: exit status %d", rc),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: strconv.Itoa(rc)}}},
		}
	default:
		st = metav1.Status{TypeMeta: st.TypeMeta, Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
	}
	data, _ := json.Marshal(&st)
	_, _ = w.Write(data)
}

// resizeQueue reads terminal sizes, JSON objects {"Width":w,"Height":h}, from the resize
// channel, and calls onEnd when the channel ends.
type resizeQueue struct {
	r     io.Reader
	dec   *json.Decoder
	onEnd func()
}

// Next returns the next size, or nil once the channel has ended.
func (q *resizeQueue) Next() *remotecommand.TerminalSize {
	if q.dec == nil {
		q.dec = json.NewDecoder(q.r)
	}
	var size remotecommand.TerminalSize
	if err := q.dec.Decode(&size); err != nil {
		// A malformed size ends resizing, not the session: wait for the channel's end.
		q.drain()
		return nil
	}
	return &size
}

// drain reads the channel to its end, then calls onEnd.
func (q *resizeQueue) drain() {
	_, _ = io.Copy(io.Discard, q.r)
	if q.onEnd != nil {
		q.onEnd()
	}
}

// portForwardTunnelProtocol is kubectl's WebSocket subprotocol carrying SPDY.
const portForwardTunnelProtocol = "SPDY/3.1+portforward.k8s.io"

// tunnelPortForward serves kubectl's port-forward over WebSocket: the client speaks SPDY
// inside binary WebSocket messages, so after upgrading both sides the bytes pass
// unchanged between the tunnel and an SPDY connection to the runtime.
func (s *Server) tunnelPortForward(w http.ResponseWriter, r *http.Request, target *url.URL) {
	backend, err := dialSPDY(r.Context(), target, "portforward.k8s.io")
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("port-forward: %w", err)))
		return
	}
	defer backend.Close()
	upgrader := gwebsocket.Upgrader{
		Subprotocols: []string{portForwardTunnelProtocol},
		// Callers are authenticated by certificate; there is no browser origin to check.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.log.Debug("websocket upgrade", "err", err)
		return
	}
	tunnel := portforward.NewTunnelingConnection("kubelet", ws)
	defer tunnel.Close()
	pipe(tunnel, backend)
}

// pipe copies both ways until either side ends, then closes both.
func pipe(a, b io.ReadWriteCloser) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { _ = a.Close(); _ = b.Close() }) }
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(a, b); closeBoth() }()
	go func() { defer wg.Done(); _, _ = io.Copy(b, a); closeBoth() }()
	wg.Wait()
}

// spdyConn is an upgraded connection whose first bytes may sit in a reader's buffer.
type spdyConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *spdyConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// dialSPDY opens target and upgrades the connection to SPDY/3.1 with the given stream
// protocol, returning the raw upgraded connection.
func dialSPDY(ctx context.Context, target *url.URL, protocol string) (net.Conn, error) {
	if target.Scheme != "http" {
		return nil, fmt.Errorf("streaming URL %s: only http is supported", target)
	}
	host := target.Host
	if target.Port() == "" {
		host = net.JoinHostPort(target.Hostname(), "80")
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	req.Header.Set("X-Stream-Protocol-Version", protocol)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		conn.Close()
		return nil, fmt.Errorf("runtime refused the upgrade: %s: %s", resp.Status, body)
	}
	return &spdyConn{Conn: conn, r: br}, nil
}
