// Command echo is the lab's HTTP backend: it answers every request with a JSON description of
// the request and of where it was served (pod, namespace, node from the downward API), so a
// test can tell which backend a proxy or a Service picked and what reached it.
//
// Usage:
//
//	echo [-listen :8080[,:8081]] [-tls-listen :8443 -cert c.pem -key k.pem] [-h2c] [-lab-endpoints]
//	echo garp -i eth0 [-ip 198.51.100.11]     send one gratuitous ARP and exit
//	echo interfaces                           print the interfaces as JSON and exit
//
// Endpoints: /healthz answers "ok"; with -lab-endpoints, /interfaces lists the network
// interfaces the process sees (a hostNetwork pod sees its node's); a WebSocket upgrade (any
// path) becomes an echo: every message comes back unchanged, the 101 names the pod in
// X-Echo-Pod; every other request is echoed as JSON.
//
// Environment: POD_NAME, POD_NAMESPACE, NODE_NAME (set them from the downward API).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// options are the flags of the server mode.
type options struct {
	Listen       []string // plain HTTP listen addresses
	TLSListen    []string // HTTPS listen addresses
	CertFile     string
	KeyFile      string
	H2C          bool // accept HTTP/2 without TLS (prior knowledge) on the plain listeners
	LabEndpoints bool // serve /interfaces
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "echo: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "garp":
			return garpCommand(args[1:], stdout)
		case "interfaces":
			return writeInterfaces(stdout)
		}
	}
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	var opts options
	var listen, tlsListen string
	fs.StringVar(&listen, "listen", ":8080", "Comma-separated plain HTTP listen addresses; empty for none.")
	fs.StringVar(&tlsListen, "tls-listen", "", "Comma-separated HTTPS listen addresses (needs -cert and -key).")
	fs.StringVar(&opts.CertFile, "cert", "", "PEM certificate (chain) for HTTPS.")
	fs.StringVar(&opts.KeyFile, "key", "", "PEM private key for HTTPS.")
	fs.BoolVar(&opts.H2C, "h2c", false, "Accept cleartext HTTP/2 (prior knowledge) on the plain listeners.")
	fs.BoolVar(&opts.LabEndpoints, "lab-endpoints", false, "Serve /interfaces (lab diagnostics).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts.Listen = splitList(listen)
	opts.TLSListen = splitList(tlsListen)
	return serve(ctx, opts)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// serve runs one http.Server per listen address until ctx ends, then shuts them down.
func serve(ctx context.Context, opts options) error {
	if len(opts.Listen)+len(opts.TLSListen) == 0 {
		return errors.New("nothing to listen on")
	}
	if len(opts.TLSListen) > 0 && (opts.CertFile == "" || opts.KeyFile == "") {
		return errors.New("-tls-listen needs -cert and -key")
	}
	h := newHandler(identityFromEnv(), opts.LabEndpoints)
	errc := make(chan error, len(opts.Listen)+len(opts.TLSListen))
	var servers []*http.Server
	start := func(addr string, useTLS bool) error {
		srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
		p := new(http.Protocols)
		p.SetHTTP1(true)
		if useTLS {
			p.SetHTTP2(true)
			cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
			if err != nil {
				return fmt.Errorf("load key pair: %w", err)
			}
			srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		} else if opts.H2C {
			p.SetUnencryptedHTTP2(true)
		}
		srv.Protocols = p
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		servers = append(servers, srv)
		log.Printf("listening on %s (tls=%v h2c=%v)", ln.Addr(), useTLS, opts.H2C && !useTLS)
		go func() {
			var err error
			if useTLS {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = srv.Serve(ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve %s: %w", addr, err)
			}
		}()
		return nil
	}
	var err error
	for _, a := range opts.Listen {
		if err = start(a, false); err != nil {
			break
		}
	}
	for _, a := range opts.TLSListen {
		if err != nil {
			break
		}
		err = start(a, true)
	}
	if err == nil {
		select {
		case <-ctx.Done():
		case err = <-errc:
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdownCtx)
	}
	return err
}
