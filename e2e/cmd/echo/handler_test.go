package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHandlerEchoesRequest(t *testing.T) {
	srv := httptest.NewTLSServer(newHandler(identity{Pod: "p", Namespace: "ns", Node: "n1"}, false))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/a/b", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "example.test"
	req.Header.Set("X-Test", "1")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got Reply
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Pod != "p" || got.Namespace != "ns" || got.Node != "n1" || got.Host != "example.test" ||
		got.Path != "/a/b" || got.Method != http.MethodPut || got.Headers.Get("X-Test") != "1" || got.RemoteAddr == "" {
		t.Errorf("unexpected reply %+v", got)
	}
	if got.TLS == nil || got.TLS.Version == "" {
		t.Errorf("tls = %+v, want the connection's TLS version", got.TLS)
	}
}

func TestHandlerHealthz(t *testing.T) {
	rec := httptest.NewRecorder()
	newHandler(identity{}, false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("got %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	newHandler(identity{}, false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	var got Reply
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.TLS != nil {
		t.Errorf("plain request: tls = %+v, err %v; want null", got.TLS, err)
	}
}
