package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
)

// addGatewayTypes registers the Gateway API kinds the proxy reads.
func addGatewayTypes(scheme *runtime.Scheme) error {
	if err := gatewayv1.Install(scheme); err != nil {
		return fmt.Errorf("register Gateway API v1 types: %w", err)
	}
	if err := gatewayv1beta1.Install(scheme); err != nil {
		return fmt.Errorf("register Gateway API v1beta1 types: %w", err)
	}
	return nil
}

// parseGatewayRef parses --gateway: namespace/name, a DNS label and a DNS subdomain.
func parseGatewayRef(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("--gateway %q: want <namespace>/<name>", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("--gateway %q: namespace %q: %s", s, ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("--gateway %q: name %q: %s", s, name, strings.Join(errs, "; "))
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// gatewayMode checks the flags of `metalgate proxy --gateway` and returns the Gateway.
func (o *proxyOptions) gatewayMode() (types.NamespacedName, error) {
	ref, err := parseGatewayRef(o.Gateway)
	if err != nil {
		return ref, err
	}
	switch {
	case o.StaticConfig != "":
		return ref, fmt.Errorf("--gateway and --static-config exclude each other: a Gateway is read from the API server")
	case len(o.WatchNamespaces) > 0:
		return ref, fmt.Errorf("--gateway and --watch-namespace exclude each other: a Gateway's routes come from any namespace its listeners allow")
	}
	return ref, nil
}

// gatewayPorts are the distinct ports of gw's HTTP and of its HTTPS and TLS Passthrough
// listeners (both served by the TLS listener: the data plane passes the connections of a
// passthrough port through by server name, table.GatewayPassthrough), sorted, and a
// description of each listener this proxy does not serve: TLS in mode Terminate, TCP and UDP
// ones, and those on a port where listeners of different protocols are (the controller
// reports them ProtocolConflict).
func gatewayPorts(gw *gatewayv1.Gateway) (httpPorts, httpsPorts []int32, skipped []string) {
	protos := map[int32]map[gatewayv1.ProtocolType]bool{}
	for _, l := range gw.Spec.Listeners {
		if protos[l.Port] == nil {
			protos[l.Port] = map[gatewayv1.ProtocolType]bool{}
		}
		protos[l.Port][l.Protocol] = true
	}
	for _, l := range gw.Spec.Listeners {
		passthrough := l.Protocol == gatewayv1.TLSProtocolType && l.TLS != nil && l.TLS.Mode != nil && *l.TLS.Mode == gatewayv1.TLSModePassthrough
		switch {
		case l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType && !passthrough:
			skipped = append(skipped, fmt.Sprintf("listener %q (%s, port %d): not HTTP, HTTPS or TLS Passthrough", l.Name, l.Protocol, l.Port))
		case len(protos[l.Port]) > 1:
			skipped = append(skipped, fmt.Sprintf("listener %q (%s, port %d): the port has listeners of other protocols", l.Name, l.Protocol, l.Port))
		case l.Protocol == gatewayv1.HTTPProtocolType && !slices.Contains(httpPorts, int32(l.Port)):
			httpPorts = append(httpPorts, int32(l.Port))
		case (l.Protocol == gatewayv1.HTTPSProtocolType || passthrough) && !slices.Contains(httpsPorts, int32(l.Port)):
			httpsPorts = append(httpsPorts, int32(l.Port))
		}
	}
	slices.Sort(httpPorts)
	slices.Sort(httpsPorts)
	return httpPorts, httpsPorts, skipped
}

// listenGateway reads the Gateway once and listens on each of its HTTP and HTTPS listener
// ports (nil for a kind it has none of): the controller's Deployment
// (controllers/gateway/proxy_deployment.go) exposes exactly those ports, and a change of the
// listeners' ports changes its pod template, so the pods that serve the new ports are new
// processes. Routes, hostnames, certificates and backends are followed live.
func listenGateway(ctx context.Context, opts proxyOptions, logger logr.Logger) (httpLn, httpsLn net.Listener, err error) {
	ref, err := opts.gatewayMode()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	scheme := runtime.NewScheme()
	if err := addGatewayTypes(scheme); err != nil {
		return nil, nil, err
	}
	if err := corev1.AddToScheme(scheme); err != nil { // Namespaces, for ListenerSets' admission
		return nil, nil, fmt.Errorf("register core v1 types: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("client for --gateway: %w", err)
	}
	var gw gatewayv1.Gateway
	if err := c.Get(ctx, ref, &gw); err != nil {
		return nil, nil, fmt.Errorf("--gateway %s: %w", ref, err)
	}
	extra, err := listenerSetListeners(ctx, c, &gw)
	if err != nil {
		return nil, nil, err
	}
	merged := gw.DeepCopy()
	merged.Spec.Listeners = append(merged.Spec.Listeners, extra...)
	httpPorts, httpsPorts, skipped := gatewayPorts(merged)
	for _, s := range skipped {
		logger.Info("Gateway listener not served", "gateway", ref.String(), "listener", s)
	}
	if len(httpPorts)+len(httpsPorts) == 0 {
		return nil, nil, fmt.Errorf("--gateway %s: no HTTP, HTTPS or TLS Passthrough listener to serve", ref)
	}
	if len(httpPorts) > 0 {
		if httpLn, err = listenPorts("", httpPorts); err != nil {
			return nil, nil, err
		}
	}
	if len(httpsPorts) > 0 {
		if httpsLn, err = listenPorts("", httpsPorts); err != nil {
			if httpLn != nil {
				_ = httpLn.Close()
			}
			return nil, nil, err
		}
	}
	return httpLn, httpsLn, nil
}

// listenerSetListeners are the served listeners of the ListenerSets gw admits
// (gatewayapi.ListenerSets: the verdict the controller's Service ports and the translator
// read too), none when the API server does not serve ListenerSet. A ListenerSet that
// changes the ports changes the controller's pod template, as the Gateway's listeners do.
func listenerSetListeners(ctx context.Context, c client.Reader, gw *gatewayv1.Gateway) ([]gatewayv1.Listener, error) {
	var sets gatewayv1.ListenerSetList
	if err := c.List(ctx, &sets); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("--gateway %s/%s: list ListenerSets: %w", gw.Namespace, gw.Name, err)
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return nil, fmt.Errorf("--gateway %s/%s: list Namespaces: %w", gw.Namespace, gw.Name, err)
	}
	var grants gatewayv1beta1.ReferenceGrantList
	if err := c.List(ctx, &grants); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("--gateway %s/%s: list ReferenceGrants: %w", gw.Namespace, gw.Name, err)
	}
	in := make([]*gatewayv1.ListenerSet, len(sets.Items))
	for i := range sets.Items {
		in[i] = &sets.Items[i]
	}
	ns := make([]*corev1.Namespace, len(nss.Items))
	for i := range nss.Items {
		ns[i] = &nss.Items[i]
	}
	gs := make([]*gatewayv1beta1.ReferenceGrant, len(grants.Items))
	for i := range grants.Items {
		gs[i] = &grants.Items[i]
	}
	return gatewayapi.ServedListenerSetListeners(gatewayapi.ListenerSets(gw, in, ns, gs)), nil
}

// listenPorts listens on host:port for each port and merges the listeners into one.
func listenPorts(host string, ports []int32) (net.Listener, error) {
	m := &multiListener{conns: make(chan acceptResult), done: make(chan struct{})}
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(p))))
		if err != nil {
			_ = m.Close()
			return nil, fmt.Errorf("listen on Gateway listener port %d: %w", p, err)
		}
		m.lns = append(m.lns, ln)
	}
	for _, ln := range m.lns {
		m.wg.Add(1)
		go m.accept(ln)
	}
	return m, nil
}

type acceptResult struct {
	conn net.Conn
	err  error
}

// multiListener accepts on several listeners as one; a connection keeps its own LocalAddr,
// whose port is the listener port the data plane routes by (table.Table.Match).
type multiListener struct {
	lns   []net.Listener
	conns chan acceptResult
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func (m *multiListener) accept(ln net.Listener) {
	defer m.wg.Done()
	for {
		c, err := ln.Accept()
		select {
		case m.conns <- acceptResult{c, err}:
		case <-m.done:
			if c != nil {
				_ = c.Close()
			}
			return
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case r := <-m.conns:
		return r.conn, r.err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *multiListener) Close() error {
	var errs []error
	m.once.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			errs = append(errs, ln.Close())
		}
	})
	return errors.Join(errs...)
}

func (m *multiListener) Addr() net.Addr { return m.lns[0].Addr() }
