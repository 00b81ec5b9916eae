package dataplane

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// pemCert makes a self-signed certificate for host as PEM, as a TLS Secret holds it.
func pemCert(t testing.TB, host string) (crt, key []byte) {
	t.Helper()
	c, err := SelfSignedCertificate(host)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}
