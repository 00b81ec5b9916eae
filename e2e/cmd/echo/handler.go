package main

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
)

// identity says where this backend runs; it is read once from the downward API environment.
type identity struct {
	Pod       string
	Namespace string
	Node      string
}

func identityFromEnv() identity {
	return identity{Pod: os.Getenv("POD_NAME"), Namespace: os.Getenv("POD_NAMESPACE"), Node: os.Getenv("NODE_NAME")}
}

// Reply is the JSON body of every echoed request.
type Reply struct {
	Pod        string      `json:"pod"`
	Namespace  string      `json:"namespace"`
	Node       string      `json:"node"`
	Host       string      `json:"host"`
	Path       string      `json:"path"`
	Method     string      `json:"method"`
	Proto      string      `json:"proto"`
	Headers    http.Header `json:"headers"`
	RemoteAddr string      `json:"remoteAddr"`
	TLS        *TLSInfo    `json:"tls"`
}

// TLSInfo describes the TLS connection a request arrived on.
type TLSInfo struct {
	Version    string `json:"version"`
	ServerName string `json:"serverName"`
	ALPN       string `json:"alpn"`
}

// handler echoes requests. It holds nothing per request: the reply is built on the stack and
// encoded straight into the ResponseWriter.
type handler struct {
	id           identity
	labEndpoints bool
}

func newHandler(id identity, labEndpoints bool) http.Handler {
	return &handler{id: id, labEndpoints: labEndpoints}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/healthz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
		return
	case isWebSocket(r):
		h.serveWebSocket(w, r)
		return
	case h.labEndpoints && r.URL.Path == "/interfaces":
		w.Header().Set("Content-Type", "application/json")
		if err := writeInterfaces(w); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
		return
	}
	reply := Reply{
		Pod:        h.id.Pod,
		Namespace:  h.id.Namespace,
		Node:       h.id.Node,
		Host:       r.Host,
		Path:       r.URL.Path,
		Method:     r.Method,
		Proto:      r.Proto,
		Headers:    r.Header,
		RemoteAddr: r.RemoteAddr,
	}
	var ti TLSInfo
	if r.TLS != nil {
		ti = TLSInfo{Version: tls.VersionName(r.TLS.Version), ServerName: r.TLS.ServerName, ALPN: r.TLS.NegotiatedProtocol}
		reply.TLS = &ti
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&reply)
}
