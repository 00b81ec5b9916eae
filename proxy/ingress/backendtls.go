package ingress

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metalgate/metalgate/proxy/table"
)

// onOff parses the nginx "on"/"off" values and Go's booleans.
func onOff(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "on":
		return true, true
	case "off":
		return false, true
	}
	b, err := strconv.ParseBool(v)
	return b, err == nil
}

// backendTLS reads proxy-ssl-secret, proxy-ssl-verify, proxy-ssl-name and
// proxy-ssl-server-name (and reports the ones metalgate does not take).
func (a *annotationReader) backendTLS(o *options) {
	ref := &table.BackendTLSRef{}
	seen := false
	note := func(key string) {
		if !seen {
			ref.Key, seen = key, true
		}
	}
	if key, v, ok := a.get("proxy-ssl-secret"); ok {
		note(key)
		ref.Secret = v
	}
	if key, v, ok := a.get("proxy-ssl-verify"); ok {
		note(key)
		if b, ok := onOff(v); ok {
			ref.Verify = &b
		} else {
			a.bad(key, v, "on or off")
		}
	}
	if key, v, ok := a.get("proxy-ssl-name"); ok {
		note(key)
		if len(validation.IsDNS1123Subdomain(strings.ToLower(v))) > 0 {
			a.bad(key, v, "a DNS name")
		} else {
			ref.ServerName = strings.ToLower(v)
		}
	}
	if key, v, ok := a.get("proxy-ssl-server-name"); ok {
		note(key)
		if b, ok := onOff(v); ok {
			ref.SNI = b
		} else {
			a.bad(key, v, "on or off")
		}
	}
	// Go's TLS client offers TLS 1.2 and 1.3 with its own cipher suites; a depth limit has no
	// equivalent in its verifier. Said, not silently ignored.
	for _, name := range []string{"proxy-ssl-protocols", "proxy-ssl-ciphers", "proxy-ssl-verify-depth"} {
		if key, v, ok := a.get(name); ok {
			a.problems = append(a.problems, problemText{table.ReasonInvalidAnnotation,
				fmt.Sprintf("annotation %s=%q is not supported: the proxy offers TLS 1.2 and 1.3 with Go's cipher suites and verifies whole chains", key, v)})
		}
	}
	if !seen {
		return
	}
	if o.Protocol != table.ProtocolHTTPS && o.Protocol != table.ProtocolGRPCS {
		a.problems = append(a.problems, problemText{table.ReasonInvalidAnnotation,
			fmt.Sprintf("annotation %s applies only with backend-protocol HTTPS or GRPCS; ignored", ref.Key)})
		return
	}
	o.backendTLS = ref
}
