package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/metalgate/metalgate/api/contract"
)

// maxName is the longest Service name (an RFC 1035 label).
const maxName = 63

// hashLen is the number of hex digits of the name hash: 8 (32 bits) keep two Gateways whose
// names were cut to the same prefix apart.
const hashLen = 8

// ServiceName is the name of the LoadBalancer Service of Gateway namespace/name:
// "gw-<namespace>-<name>-<hash>", cut to 63 characters before the hash, with characters a
// Service name cannot hold ('.') replaced by '-'. The hash is of "namespace/name", so names
// that read alike after cutting and replacing still differ.
func ServiceName(namespace, name string) string {
	h := hash(namespace + "/" + name)
	prefix := strings.ReplaceAll("gw-"+namespace+"-"+name, ".", "-")
	if max := maxName - 1 - hashLen; len(prefix) > max {
		prefix = prefix[:max]
	}
	return strings.TrimRight(prefix, "-") + "-" + h
}

// LabelValue is name when it is a valid label value (at most 63 characters; Gateway names are
// DNS subdomains, so only their length can be wrong), else its first 54 characters, '-' and
// the hash: still unique and still readable.
func LabelValue(name string) string {
	if len(name) <= maxName {
		return name
	}
	return strings.TrimRight(name[:maxName-1-hashLen], "-.") + "-" + hash(name)
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:hashLen]
}

// Labels are the labels of the Service of Gateway namespace/name, and the selector of its
// proxy pods.
func Labels(namespace, name string) map[string]string {
	return map[string]string{contract.LabelGatewayNamespace: namespace, contract.LabelGatewayName: LabelValue(name)}
}
