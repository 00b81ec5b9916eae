package lab

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// identity is one client certificate of the cluster: who a component is to the API server.
type identity struct {
	File  string // base name of the .crt/.key/.kubeconfig files
	User  string // certificate CN = Kubernetes user name
	Group string // certificate O = Kubernetes group ("" for none)
	// InCluster: the kubeconfig points at the API server's segment address (components in
	// namespaces) instead of the user link (the root namespace).
	InCluster bool
}

// identities lists every client of the API server. The bootstrap RBAC policy already binds
// these user and group names.
func (c Config) identities() []identity {
	ids := []identity{
		{File: "admin", User: "lab-admin", Group: "system:masters"},
		{File: "kube-controller-manager", User: "system:kube-controller-manager", InCluster: true},
		{File: "kube-scheduler", User: "system:kube-scheduler", InCluster: true},
		{File: "kube-proxy", User: "system:kube-proxy", InCluster: true},
		{File: "apiserver-kubelet-client", User: "kube-apiserver-kubelet-client", Group: "system:masters"},
	}
	for _, n := range Nodes() {
		ids = append(ids, identity{File: "kubelet-" + n.Name, User: "system:node:" + n.Name, Group: "system:nodes", InCluster: true})
	}
	return ids
}

// writePKI creates a fresh CA, the API server's serving certificate, the service-account key
// pair, one client certificate and kubeconfig per identity, and the user's kubeconfig.
func (c Config) writePKI() error {
	dir := c.pkiDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	ca, err := newLabCA(dir, c.Prefix, time.Now().Add(-time.Hour))
	if err != nil {
		return err
	}
	if err := ca.issue("apiserver", c.apiServerCertificate()); err != nil {
		return err
	}
	for _, id := range c.identities() {
		subj := pkix.Name{CommonName: id.User}
		if id.Group != "" {
			subj.Organization = []string{id.Group}
		}
		if err := ca.issue(id.File, &x509.Certificate{Subject: subj, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return err
		}
		server := c.APIServerURL()
		if id.InCluster {
			server = c.inClusterAPIServerURL()
		}
		if err := c.writeKubeconfig(filepath.Join(dir, id.File+".kubeconfig"), server, id.File); err != nil {
			return err
		}
	}
	if err := writeServiceAccountKey(dir); err != nil {
		return err
	}
	// The user's kubeconfig, at a stable path: the admin identity over the user link.
	return c.writeKubeconfig(c.KubeconfigPath(), c.APIServerURL(), "admin")
}

// labCA is the lab's certificate authority, written to dir/ca.{crt,key}; issue signs with it.
type labCA struct {
	dir    string
	now    time.Time // NotBefore of everything it signs
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64 // of the next certificate
}

// newLabCA creates a CA valid from now for 10 years and writes it to dir.
func newLabCA(dir, prefix string, now time.Time) (*labCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "metalgate-lab-ca " + prefix},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	if err := writeCertKey(filepath.Join(dir, "ca"), der, key); err != nil {
		return nil, err
	}
	return &labCA{dir: dir, now: now, cert: cert, key: key, serial: 2}, nil
}

// issue signs tmpl (valid 5 years, for digital signatures) for a new key and writes both to
// dir/name.{crt,key}.
func (ca *labCA) issue(name string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = big.NewInt(ca.serial)
	ca.serial++
	tmpl.NotBefore, tmpl.NotAfter = ca.now, ca.now.Add(5*365*24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return fmt.Errorf("pki: %s: %w", name, err)
	}
	return writeCertKey(filepath.Join(ca.dir, name), der, key)
}

// apiServerCertificate is the template of the API server's serving certificate: every name
// and address it is reached by, from the segment, the user link, the cluster and loopback.
func (c Config) apiServerCertificate() *x509.Certificate {
	var ips []net.IP
	for _, a := range []string{ControlPlane.IPv4.String(), ControlPlane.IPv6.String(), c.UserAPIAddr().String(),
		APIServiceIP.String(), "2001:db8:2::1", "127.0.0.1", "::1"} {
		ips = append(ips, net.ParseIP(a))
	}
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local", "localhost"},
		IPAddresses: ips,
	}
}

// writeServiceAccountKey writes the key pair that signs service-account tokens (RSA, the API
// server's default algorithm) to dir/sa.{pub,key}.
func writeServiceAccountKey(dir string) error {
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("pki: service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return fmt.Errorf("pki: service-account key: %w", err)
	}
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))
}

// writeKubeconfig writes a kubeconfig with absolute paths to the CA and the client pair.
func (c Config) writeKubeconfig(path, server, id string) error {
	pki := c.pkiDir()
	name := "metalgate-lab-" + c.Prefix
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority: %[3]s/ca.crt
users:
- name: %[4]s
  user:
    client-certificate: %[3]s/%[4]s.crt
    client-key: %[3]s/%[4]s.key
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: %[4]s}
current-context: %[1]s
`, name, server, pki, id)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		return fmt.Errorf("pki: kubeconfig: %w", err)
	}
	return nil
}

func writeCertKey(base string, der []byte, key crypto.Signer) error {
	if err := writePEM(base+".crt", "CERTIFICATE", der); err != nil {
		return err
	}
	k, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("pki: marshal key: %w", err)
	}
	return writePEM(base+".key", "PRIVATE KEY", k)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}
