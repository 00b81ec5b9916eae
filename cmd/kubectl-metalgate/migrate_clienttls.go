package main

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// stubCA is a self-signed CA certificate (no key kept) for stubClientCASecret.
const stubCA = `
-----BEGIN CERTIFICATE-----
MIIBjDCCATGgAwIBAgIBATAKBggqhkjOPQQDAjAsMSowKAYDVQQDEyFrdWJlY3Rs
LW1ldGFsZ2F0ZSBtaWdyYXRlIHN0dWIgQ0EwIBcNMjUwMTAxMDAwMDAwWhgPMjEy
NTAxMDEwMDAwMDBaMCwxKjAoBgNVBAMTIWt1YmVjdGwtbWV0YWxnYXRlIG1pZ3Jh
dGUgc3R1YiBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABO7kYBXHR1DFNGEP
P1Q5WYIGGciCGvDCI5sJ8zg5KCDJVxge3bruvO7Psdhi7mXB9fezxNwQ3wmNXGG9
MAEPhMmjQjBAMA4GA1UdDwEB/wQEAwICBDAPBgNVHRMBAf8EBTADAQH/MB0GA1Ud
DgQWBBSmKQDemF8BzkRiZZZayXC1qQSQGDAKBggqhkjOPQQDAgNJADBGAiEAvMNu
91Mo/Puxg+cACvON04n+7C8lboMxl/zVOmUw0yECIQDp9qcwHJbje5hh1d0JP1jz
QQgmIMjwLiNgt0K5Kjj8hg==
-----END CERTIFICATE-----
`

// stubClientCASecret stands in for the CA Secret (ca.crt) an Ingress's auth-tls-secret names
// in its own namespace: the migration reads no Secret, so only problems of the annotations
// themselves are reported (a Secret of another namespace is left out: the proxy refuses it).
func stubClientCASecret(ing *networkingv1.Ingress) []*corev1.Secret {
	name, ok := ing.Annotations[ingress.PrefixMetalgate+"auth-tls-secret"]
	if !ok {
		name = ing.Annotations[ingress.PrefixNginx+"auth-tls-secret"]
	}
	name = strings.TrimSpace(name)
	if ns, n, ok := strings.Cut(name, "/"); ok {
		if ns != ing.Namespace {
			return nil
		}
		name = n
	}
	if name == "" {
		return nil
	}
	return []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: ing.Namespace, Name: name},
		Data: map[string][]byte{"ca.crt": []byte(strings.TrimSpace(stubCA))}}}
}
