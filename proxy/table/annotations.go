package table

import (
	"fmt"
	"strconv"
	"strings"
)

// Annotations read from an Ingress. Values are documented in docs/proxy.md.
const (
	AnnotationBackendProtocol = "metalgate.io/backend-protocol"
	AnnotationSSLRedirect     = "metalgate.io/ssl-redirect"
	AnnotationBodySize        = "metalgate.io/proxy-body-size"
	AnnotationLoadBalance     = "metalgate.io/load-balance"
	AnnotationHashBy          = "metalgate.io/hash-by"
	AnnotationAffinity        = "metalgate.io/affinity"
	AnnotationAffinityCookie  = "metalgate.io/affinity-cookie-name"
)

// Protocol is how the proxy speaks to a backend.
type Protocol string

const (
	// ProtocolHTTP is HTTP/1.1 to the backend (the default); Upgrade (WebSocket) works over it.
	ProtocolHTTP Protocol = "http"
	// ProtocolH2C is HTTP/2 without TLS (prior knowledge) to the backend; gRPC needs it.
	ProtocolH2C Protocol = "h2c"
)

// Algorithm names a load-balancing algorithm.
type Algorithm string

const (
	RoundRobin   Algorithm = "round-robin"
	LeastRequest Algorithm = "least-request"
	EWMA         Algorithm = "ewma"
	Hash         Algorithm = "hash"
)

// HashSource says what a hash-balanced backend hashes.
type HashSource string

const (
	HashByNone     HashSource = ""
	HashByHeader   HashSource = "header"
	HashByCookie   HashSource = "cookie"
	HashByClientIP HashSource = "client-ip"
)

// DefaultAffinityCookie is the cookie name of cookie affinity unless the Ingress names one.
const DefaultAffinityCookie = "metalgate-affinity"

// Balance is a backend's load-balancing policy.
type Balance struct {
	Algorithm Algorithm
	// HashBy and HashKey (header or cookie name) apply when Algorithm is Hash.
	HashBy  HashSource
	HashKey string
	// AffinityCookie, when not empty, pins a client to the endpoint named in this cookie; the
	// first pick uses Algorithm.
	AffinityCookie string
}

func (b Balance) String() string {
	s := string(b.Algorithm)
	if b.HashBy != HashByNone {
		s += "/" + string(b.HashBy) + ":" + b.HashKey
	}
	if b.AffinityCookie != "" {
		s += "/affinity:" + b.AffinityCookie
	}
	return s
}

// Options are the per-Ingress settings taken from its annotations.
type Options struct {
	Protocol    Protocol
	Balance     Balance
	SSLRedirect bool
	// MaxBodyBytes limits request bodies; 0 means the server's default, -1 unlimited.
	MaxBodyBytes int64
}

// parseOptions reads an Ingress's annotations. Invalid values fall back to the default and
// are returned as problems (one string each).
func parseOptions(ann map[string]string) (Options, []string) {
	o := Options{Protocol: ProtocolHTTP, Balance: Balance{Algorithm: RoundRobin}}
	var problems []string
	bad := func(key, val, want string) {
		problems = append(problems, fmt.Sprintf("annotation %s=%q is invalid (want %s); using the default", key, val, want))
	}
	if v, ok := ann[AnnotationBackendProtocol]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "http", "http1", "":
			o.Protocol = ProtocolHTTP
		case "h2c", "grpc":
			o.Protocol = ProtocolH2C
		default:
			bad(AnnotationBackendProtocol, v, "http, h2c or grpc")
		}
	}
	if v, ok := ann[AnnotationSSLRedirect]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			bad(AnnotationSSLRedirect, v, "true or false")
		}
		o.SSLRedirect = b
	}
	if v, ok := ann[AnnotationBodySize]; ok {
		n, err := parseSize(v)
		if err != nil {
			bad(AnnotationBodySize, v, "a size such as 0, 512k, 8m or 1g")
		} else if n == 0 {
			o.MaxBodyBytes = -1
		} else {
			o.MaxBodyBytes = n
		}
	}
	if v, ok := ann[AnnotationLoadBalance]; ok {
		switch a := Algorithm(strings.ToLower(strings.TrimSpace(v))); a {
		case RoundRobin, LeastRequest, EWMA, Hash:
			o.Balance.Algorithm = a
		case "peak-ewma":
			o.Balance.Algorithm = EWMA
		default:
			bad(AnnotationLoadBalance, v, "round-robin, least-request, ewma or hash")
		}
	}
	if v, ok := ann[AnnotationHashBy]; ok {
		src, key, _ := strings.Cut(strings.TrimSpace(v), ":")
		switch HashSource(strings.ToLower(src)) {
		case HashByHeader, HashByCookie:
			if key == "" {
				bad(AnnotationHashBy, v, "header:NAME, cookie:NAME or client-ip")
				break
			}
			o.Balance.HashBy, o.Balance.HashKey = HashSource(strings.ToLower(src)), key
		case HashByClientIP:
			o.Balance.HashBy = HashByClientIP
		default:
			bad(AnnotationHashBy, v, "header:NAME, cookie:NAME or client-ip")
		}
		if o.Balance.HashBy != HashByNone {
			if _, set := ann[AnnotationLoadBalance]; !set {
				o.Balance.Algorithm = Hash // hash-by alone implies hashing
			}
		}
	}
	if o.Balance.Algorithm == Hash && o.Balance.HashBy == HashByNone {
		o.Balance.HashBy = HashByClientIP
	}
	if o.Balance.Algorithm != Hash {
		o.Balance.HashBy, o.Balance.HashKey = HashByNone, ""
	}
	if v, ok := ann[AnnotationAffinity]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "cookie":
			o.Balance.AffinityCookie = DefaultAffinityCookie
			if name := strings.TrimSpace(ann[AnnotationAffinityCookie]); name != "" {
				o.Balance.AffinityCookie = name
			}
		case "", "none":
		default:
			bad(AnnotationAffinity, v, "cookie or none")
		}
	}
	return o, problems
}

// parseSize parses "1024", "512k", "8m", "1g" (powers of 1024, case-insensitive).
func parseSize(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k':
			mult, s = 1<<10, s[:n-1]
		case 'm':
			mult, s = 1<<20, s[:n-1]
		case 'g':
			mult, s = 1<<30, s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return v * mult, nil
}
