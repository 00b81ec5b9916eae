// Command benchresume checks that a TLS load generator makes a full handshake for every new
// connection, as hack/bench-proxy.sh's new-connections scenario needs: Go's TLS server (and so
// metalgate's) issues TLS 1.3 session tickets by default, and a client that reconnects with the
// same OpenSSL object resumes with them (wrk and h2load do, against Go; nginx's tickets and
// session cache are off in the benchmark), which would measure a cheap PSK resumption against
// nginx's full handshake.
//
// It serves HTTPS with Go's default server settings (session tickets on, as metalgate's
// tls.Config) and answers every request with "ok". On SIGTERM or SIGINT it prints
//
//	full=<handshakes> resumed=<resumptions>
//
// and exits. Usage: benchresume -listen 127.0.0.1:18446 -cert c.pem -key k.pem
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18446", "HTTPS listen address.")
	cert := flag.String("cert", "", "PEM certificate.")
	key := flag.String("key", "", "PEM private key.")
	flag.Parse()
	if err := run(*listen, *cert, *key); err != nil {
		fmt.Fprintf(os.Stderr, "benchresume: %v\n", err)
		os.Exit(1)
	}
}

func run(listen, certFile, keyFile string) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	var full, resumed atomic.Int64
	srv := &http.Server{
		Addr: listen,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ok\n"))
		}),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			NextProtos:   []string{"h2", "http/1.1"},
			// VerifyConnection runs on every handshake, resumptions included.
			VerifyConnection: func(cs tls.ConnectionState) error {
				if cs.DidResume {
					resumed.Add(1)
				} else {
					full.Add(1)
				}
				return nil
			},
		},
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServeTLS("", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if err := srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Printf("full=%d resumed=%d\n", full.Load(), resumed.Load())
	return nil
}
