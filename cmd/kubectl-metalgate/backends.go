package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalgate/metalgate/api/contract"
)

// proxyAnswer is what one proxy pod said about an Ingress.
type proxyAnswer struct {
	proxy    proxyPod
	backends *contract.Backends // set when the proxy serves the Ingress
	notOurs  string             // the proxy's 404 message: it does not serve the Ingress
	err      error              // no usable answer
}

// backends prints the live routing table of every proxy pod that serves the Ingress.
func backends(ctx context.Context, e *env, out io.Writer) error {
	id := e.args[0]
	if !strings.Contains(id, "/") {
		ns := e.contextNamespace
		if e.o.namespaceSet {
			ns = e.o.namespace
		}
		id = ns + "/" + id
	}
	if ns, name, _ := strings.Cut(id, "/"); ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("INGRESS %q: want namespace/name, or name with -n", e.args[0])
	}
	proxies, err := listProxies(ctx, e.c)
	if err != nil {
		return err
	}
	if len(proxies) == 0 {
		return errors.New("no metalgate proxy pods in any namespace (label app.kubernetes.io/component=proxy)")
	}
	answers := askProxies(ctx, e.pods, proxies, id)
	return writeBackends(out, id, answers, e.now())
}

// askProxies asks every running proxy pod for the Ingress's routes.
func askProxies(ctx context.Context, pods podProxy, proxies []proxyPod, id string) []proxyAnswer {
	out := make([]proxyAnswer, len(proxies))
	parallel(len(proxies), func(i int) { out[i] = askProxy(ctx, pods, proxies[i], id) })
	return out
}

// askProxy asks one proxy pod for the Ingress's routes.
func askProxy(ctx context.Context, pods podProxy, p proxyPod, id string) proxyAnswer {
	a := proxyAnswer{proxy: p}
	if p.pod.Status.Phase != corev1.PodRunning || p.pod.DeletionTimestamp != nil {
		a.err = fmt.Errorf("pod is %s", podState(p.pod))
		return a
	}
	code, body, err := pods.Get(ctx, p.pod.Namespace, p.pod.Name, p.adminPort, contract.DebugBackendsPath, url.Values{"ingress": {id}})
	switch {
	case err != nil:
		a.err = err
	case code == http.StatusNotFound:
		a.notOurs = shortBody(body)
	case code != http.StatusOK:
		a.err = fmt.Errorf("HTTP %d: %s", code, shortBody(body))
	default:
		var b contract.Backends
		if err := json.Unmarshal(body, &b); err != nil {
			a.err = fmt.Errorf("decode %s: %w", contract.DebugBackendsPath, err)
		} else {
			a.backends = &b
		}
	}
	return a
}

// writeBackends prints one table per proxy pod serving the Ingress; an error when none does.
func writeBackends(out io.Writer, id string, answers []proxyAnswer, now time.Time) error {
	served := 0
	var others []string
	for _, a := range answers {
		switch {
		case a.err != nil:
			others = append(others, fmt.Sprintf("proxy %s did not answer: %v", a.proxy, a.err))
		case a.backends == nil:
			others = append(others, fmt.Sprintf("proxy %s: %s", a.proxy, a.notOurs))
		}
	}
	for _, a := range answers {
		b := a.backends
		if b == nil {
			continue
		}
		if served > 0 {
			fmt.Fprintln(out)
		}
		served++
		applied := "unknown"
		if !b.Applied.IsZero() {
			applied = fmt.Sprintf("%s ago", now.Sub(b.Applied).Round(time.Second))
		}
		fmt.Fprintf(out, "proxy %s (node %s): table generation %d, applied %s\n", a.proxy, orDash(a.proxy.pod.Spec.NodeName), b.Generation, applied)
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "HOST\tPATH\tSERVICE:PORT\tENDPOINT\tREADY\tHEALTHY\tIN-FLIGHT")
		for _, r := range b.Routes {
			host := r.Host
			if host == "" {
				host = "*"
			}
			path := fmt.Sprintf("%s (%s)", r.Path, r.PathType)
			svc := r.Service + ":" + r.Port
			if len(r.Endpoints) == 0 {
				fmt.Fprintf(w, "%s\t%s\t%s\t<none>\t-\t-\t-\n", host, path, svc)
			}
			for _, ep := range r.Endpoints {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", host, path, svc, ep.Address, readiness(ep), health(ep), inFlight(ep))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if served == 0 {
		for _, o := range others {
			fmt.Fprintln(out, o)
		}
		return fmt.Errorf("no metalgate proxy serves Ingress %s (%d asked); kubectl metalgate check says why", id, len(answers))
	}
	for _, o := range others {
		if !strings.Contains(o, "does not serve") {
			fmt.Fprintf(out, "warning: %s\n", o)
		}
	}
	return nil
}

// readiness is the READY column: the EndpointSlice conditions.
func readiness(e contract.BackendEndpoint) string {
	switch {
	case e.Ready:
		return "yes"
	case e.Serving && e.Terminating:
		return "terminating"
	case e.Terminating:
		return "no (terminating)"
	}
	return "no"
}

// health is the HEALTHY column: the data plane's view; "-" when not routed at all, with the
// reason when the proxy refuses the address.
func health(e contract.BackendEndpoint) string {
	switch {
	case e.Refused != "":
		return "- (refused: " + e.Refused + ")"
	case !e.Routed:
		return "- (not routed)"
	case e.Healthy:
		return "yes"
	}
	return "no (ejected)"
}

func inFlight(e contract.BackendEndpoint) string {
	if !e.Routed {
		return "-"
	}
	return fmt.Sprint(e.InFlight)
}
