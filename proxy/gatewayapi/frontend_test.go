package gatewayapi

import (
	"fmt"

	"github.com/metalgate/metalgate/proxy/table"
)

// summarizeFrontend adds the client-certificate validation of each port ("valid-only" or
// "insecure-fallback", and "refuse: why" when no CA is usable) and the listeners' problems
// with it to a golden summary.
func summarizeFrontend(g *golden, t *table.Table, st *table.GatewayStatus) {
	for port, ca := range t.GatewayClientAuths() {
		if g.ClientCertificates == nil {
			g.ClientCertificates = map[int32]string{}
		}
		line := "valid-only"
		if ca.InsecureFallback {
			line = "insecure-fallback"
		}
		line += fmt.Sprintf(" depth=%d", ca.Depth)
		if ca.Refuse != "" {
			line += " refuse: " + ca.Refuse
		} else if ca.Authority == nil {
			line += " NO AUTHORITY"
		}
		g.ClientCertificates[port] = line
	}
	for l, p := range st.FrontendProblems {
		if g.FrontendProblems == nil {
			g.FrontendProblems = map[string]string{}
		}
		g.FrontendProblems[l] = fmt.Sprintf("%s (no valid CA: %t): %s", p.Reason, p.NoValidCA, p.Message)
	}
}
