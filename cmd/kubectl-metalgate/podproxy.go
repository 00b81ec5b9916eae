package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// podProxy reads an HTTP path from a port of a pod. The plugin reaches the speakers and the
// ingress proxies only through the API server, so it needs no route to the pod network;
// tests serve it with httptest.
type podProxy interface {
	// Get returns the HTTP status and body of GET path?query, sent with header (may be nil), on
	// the pod's port. err is set when no answer came back (the API server could not reach the
	// pod, or the pod is gone).
	Get(ctx context.Context, namespace, pod string, port int, path string, query url.Values, header http.Header) (status int, body []byte, err error)
}

// maxBody bounds an answer read from a pod.
const maxBody = 8 << 20

// portForwards is podProxy through the API server's pods/portforward subresource, as kubectl
// port-forward does: the API server authorises the user (create pods/portforward), the
// kubelet's container runtime dials localhost:port inside the pod's network namespace, and the
// proxy serves the request because it comes from loopback (internal/adminauth). The speakers
// run on the host network, where loopback is the node's and counts for nothing: they are sent
// a bearer token too (speakertoken.go). pods/proxy cannot do this: the API server strips the
// user's credentials before proxying, and its own connection to the pod is anonymous.
//
// One forwarding connection per pod, opened on first use and shared by every request to that
// pod (each HTTP connection is one stream pair on it); Close ends them all.
type portForwards struct {
	// url is the portforward URL of a pod.
	url func(namespace, pod string) *url.URL
	// dial opens a forwarding connection to url (websocket, falling back to SPDY).
	dial func(u *url.URL) (httpstream.Connection, error)

	mu     sync.Mutex
	pods   map[string]*forward // "namespace/pod"
	closed bool
}

// newPortForwards returns a podProxy through pods/portforward of the cluster of cfg; core is
// the core/v1 REST client of that config (it builds the URLs).
func newPortForwards(cfg *rest.Config, core rest.Interface) (*portForwards, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward client: %w", err)
	}
	return &portForwards{
		url: func(namespace, pod string) *url.URL {
			return core.Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
		},
		dial: func(u *url.URL) (httpstream.Connection, error) {
			// As kubectl port-forward: websockets first (API servers from 1.31 on), SPDY when
			// the upgrade is refused.
			ws, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
			if err != nil {
				return nil, err
			}
			dialer := portforward.NewFallbackDialer(ws, spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u),
				func(err error) bool { return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err) })
			conn, proto, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
			if err != nil {
				return nil, err
			}
			if proto != portforward.PortForwardProtocolV1Name {
				conn.Close()
				return nil, fmt.Errorf("API server negotiated protocol %q, want %q", proto, portforward.PortForwardProtocolV1Name)
			}
			return conn, nil
		},
		pods: map[string]*forward{},
	}, nil
}

// Get implements podProxy.
func (p *portForwards) Get(ctx context.Context, namespace, pod string, port int, path string, query url.Values, header http.Header) (int, []byte, error) {
	fail := func(err error) (int, []byte, error) {
		return 0, nil, fmt.Errorf("GET %s from pod %s/%s port %d: %w", path, namespace, pod, port, err)
	}
	f, err := p.forward(ctx, namespace, pod)
	if err != nil {
		return fail(err)
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort("localhost", strconv.Itoa(port)), Path: path, RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fail(err)
	}
	return resp.StatusCode, body, nil
}

// forward returns the pod's forwarding connection, opening it on first use.
func (p *portForwards) forward(ctx context.Context, namespace, pod string) (*forward, error) {
	key := namespace + "/" + pod
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("port-forwards closed")
	}
	f := p.pods[key]
	if f == nil {
		f = &forward{dialed: make(chan struct{})}
		p.pods[key] = f
		u := p.url(namespace, pod)
		go func() {
			// Dial takes no context: it runs on its own; a caller that gives up leaves the
			// connection to Close, or to this goroutine when Close came first.
			conn, err := p.dial(u)
			p.mu.Lock()
			defer p.mu.Unlock()
			defer close(f.dialed)
			switch {
			case err != nil:
				f.err = fmt.Errorf("port-forward: %w", err)
			case p.closed:
				_ = conn.Close()
				f.err = errors.New("port-forwards closed")
			default:
				f.conn = conn
				f.client = &http.Client{Transport: &http.Transport{
					DialContext:         f.dialStream,
					MaxIdleConnsPerHost: 2,
					DisableCompression:  true,
					Proxy:               nil, // the stream is the connection: no proxy applies
				}}
			}
		}()
	}
	p.mu.Unlock()
	select {
	case <-f.dialed:
		return f, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("port-forward: %w", ctx.Err())
	}
}

// Close ends every forwarding connection; Get fails afterwards.
func (p *portForwards) Close() {
	p.mu.Lock()
	p.closed = true
	pods := p.pods
	p.pods = nil
	p.mu.Unlock()
	for _, f := range pods {
		select {
		case <-f.dialed:
			if f.conn != nil {
				f.client.CloseIdleConnections()
				_ = f.conn.Close()
			}
		default: // still dialing: the dialing goroutine closes what it gets
		}
	}
}

// forward is one pod's forwarding connection.
type forward struct {
	dialed chan struct{} // closed when conn (or err) is set
	conn   httpstream.Connection
	client *http.Client
	err    error
	nextID atomic.Int64
}

// remoteErrorWait bounds the wait for the kubelet's message about a stream that ended (e.g.
// "connection refused" from inside the pod) before the bare end of stream is reported.
const remoteErrorWait = 2 * time.Second

// dialStream opens one TCP connection to the pod's port: an error stream and a data stream with
// one request ID (the port-forward protocol of k8s.io/client-go/tools/portforward).
func (f *forward) dialStream(ctx context.Context, _, addr string) (net.Conn, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, port)
	h.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(f.nextID.Add(1), 10))
	errStream, err := f.conn.CreateStream(h)
	if err != nil {
		return nil, fmt.Errorf("create error stream: %w", err)
	}
	_ = errStream.Close() // nothing is written to it
	remote := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errStream)
		switch {
		case err != nil:
			remote <- fmt.Errorf("read error stream: %w", err)
		case len(msg) > 0:
			remote <- fmt.Errorf("port-forward to port %s: %s", port, strings.TrimSpace(string(msg)))
		}
		close(remote)
	}()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := f.conn.CreateStream(h)
	if err != nil {
		f.conn.RemoveStreams(errStream)
		return nil, fmt.Errorf("create data stream: %w", err)
	}
	if err := ctx.Err(); err != nil {
		_ = data.Reset()
		f.conn.RemoveStreams(errStream, data)
		return nil, err
	}
	return &streamConn{data: data, errStream: errStream, conn: f.conn, remote: remote, port: port}, nil
}

// streamConn is a data stream as a net.Conn for http.Transport. Deadlines are not supported
// (the transport uses none: request contexts cancel by closing the connection).
type streamConn struct {
	data, errStream httpstream.Stream
	conn            httpstream.Connection
	remote          <-chan error
	port            string
	closeOnce       sync.Once
}

func (c *streamConn) Read(b []byte) (int, error) {
	n, err := c.data.Read(b)
	if err != nil && n == 0 {
		// The stream ended: report the kubelet's reason when it gives one.
		t := time.NewTimer(remoteErrorWait)
		defer t.Stop()
		select {
		case rerr, ok := <-c.remote:
			if ok && rerr != nil {
				return 0, rerr
			}
		case <-t.C:
		}
	}
	return n, err
}

func (c *streamConn) Write(b []byte) (int, error) { return c.data.Write(b) }

func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.data.Reset()
		c.conn.RemoveStreams(c.data, c.errStream)
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr              { return streamAddr("local") }
func (c *streamConn) RemoteAddr() net.Addr             { return streamAddr("pod:" + c.port) }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }
func (streamAddr) Network() string                     { return "portforward" }
func (a streamAddr) String() string                    { return string(a) }

type streamAddr string

// shortBody trims an answer for a message.
func shortBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
