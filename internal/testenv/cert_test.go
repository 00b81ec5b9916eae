package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
)

// TestSelfSigned: the pair loads as a TLS certificate for the host, and is valid now.
func TestSelfSigned(t *testing.T) {
	crt, key := SelfSigned(t, "a.example.com")
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatalf("X509KeyPair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("a.example.com"); err != nil {
		t.Errorf("VerifyHostname: %v", err)
	}
	if now := time.Now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		t.Errorf("not valid now: %v – %v", leaf.NotBefore, leaf.NotAfter)
	}
}
