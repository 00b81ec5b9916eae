#!/usr/bin/env python3
"""Mutation check of the proxy's hardening (issue: proxy hardening).

Each mutation reverts one fix in a scratch git worktree of HEAD and runs the test that pins
it; every test must fail. Prints one line per mutation and exits 1 when a test still passes
or a pattern no longer matches the code (then update the pattern here with the code). A
mutation may name extra `go test` flags (a race that only the race detector sees at once
runs with -race, several times) and, after them, the package its test is in (default
./proxy/dataplane/).

Usage: make mutations   (or hack/mutations.py [NAME-PREFIX ...])
"""
import os
import shutil
import subprocess
import sys
import tempfile

root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True).stdout.strip()
tmp = tempfile.mkdtemp(prefix="metalgate-mutations-")
work = os.path.join(tmp, "tree")
subprocess.run(["git", "-C", root, "worktree", "add", "-q", "--detach", work, "HEAD"], check=True)
os.chdir(work)
M = [
 ("M1 desync: pool despite leftover bytes", "proxy/dataplane/h1transport.go", [("case b.c.br.Buffered() > 0:", "case false:"), ("switch c.idle.state() {", "switch idleOK {")], "TestHostileBackend$"),
 ("M2 no response header cap", "proxy/dataplane/h1transport.go", [("c.limit = t.maxHeaderBytes", "c.limit = math.MaxInt64")], "TestHostileBackendHeapBounded"),
 ("M3 no 1xx count", "proxy/dataplane/h1transport.go", [("if n1xx++; n1xx > t.max1xx {", "if n1xx++; false {")], "TestHostileBackend$/1xx_flood"),
 ("M4 cancel watch stops at headers", "proxy/dataplane/h1transport.go", [("b := &h1Body{rc: resp.Body, c: c, t: t, stop: stop,", "stop()\n\tb := &h1Body{rc: resp.Body, c: c, t: t, stop: func() bool { return true },")], "TestClientAbortReleasesBackend"),
 ("M5 no client body timeout", "proxy/dataplane/handler.go", [("		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))\n", "")], "TestStalledClientBody"),
 ("M6 no send timeout", "proxy/dataplane/handler.go", [("	d := w.s.opts.SendTimeout\n", "	d := time.Duration(0)\n")], "TestSlowReader"),
 ("M7 no HTTP/2 write timeout", "proxy/dataplane/server.go", [("WriteByteTimeout: s.opts.HTTP2WriteTimeout,", "")], "TestHTTP2WriteTimeout"),
 ("M8 no connection caps", "proxy/dataplane/server.go", [("ln = s.limitListener(s.proxyProtocolListener(ln, pp), name)", "ln = s.proxyProtocolListener(ln, pp)")], "TestMaxConnections"),
 ("M9 no path normalisation", "proxy/dataplane/handler.go", [("	raw := r.URL.EscapedPath()\n", "	return nil\n	raw := r.URL.EscapedPath()\n")], "TestPathNormalisation"),
 ("M10 container port as X-Forwarded-Port", "proxy/dataplane/headers.go", [('f.proto, f.port = "https", s.httpsPort', 'f.proto, f.port = "https", "8443"')], "TestResponseHeaderTruth"),
 ("M11 backend Server header passes", "proxy/dataplane/headers.go", [('	delete(h, "Server")\n', '')], "TestResponseHeaderTruth"),
 ("M12 no 421", "proxy/dataplane/handler.go", [("if r.TLS != nil && !s.sameCertificate(", "if false && !s.sameCertificate(")], "TestMisdirectedRequest"),
 ("M13 '_' headers forwarded", "proxy/dataplane/headers.go", [("!s.opts.AllowUnderscoreHeaders && strings.IndexByte(k, '_') >= 0", "false")], "TestRequestHeaderPolicy"),
 ("M14 h2c upgrade forwarded", "proxy/dataplane/handler.go", [('		r.Header.Del("Upgrade")\n', '')], "TestRequestHeaderPolicy"),
 ("M15 malformed body blamed on the backend", "proxy/dataplane/upstream.go", [("case a != nil && a.bodyErr.Load() != nil:", "case false:")], "TestMalformedClientBody"),
 ("M16 reversible affinity cookie", "proxy/dataplane/router.go", [("return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])", "return base64.RawURLEncoding.EncodeToString([]byte(addr))")], "TestAffinityCookieKeyed"),
 ("M18 TLS records past a response ignored", "proxy/dataplane/h1transport.go", [("case b.c.tls != nil && !b.tlsClean():", "case false && !b.tlsClean():")], "TestHostileTLSBackend"),
 ("M17 103 dropped on the direct path", "proxy/dataplane/direct.go", [("s.writeHead(bw, r, a) }, got1xx, a.route", "s.writeHead(bw, r, a) }, func(int, http.Header) error { _ = got1xx; return nil }, a.route")], "TestEarlyHints"),
 ("M19 a removed endpoint kept after a patched Swap", "proxy/dataplane/router.go", [("if refs[e.Addr]--; refs[e.Addr] <= 0 {", "if refs[e.Addr]--; false {")], "TestSwapPatchedTable"),
 ("M20 a client body's deadline touched after the handler returned", "proxy/dataplane/handler.go", [("\t\tst.a.body.finish()\n", "")], "TestBodyReadAfterTheAnswer|TestGatewayGRPCRoute", ["-race", "-count=5"]),
 ("M21a backend TLS ID without the Service's name or namespace", "proxy/table/backendtls.go", [("bt.ID = backendTLSID(svc.Namespace, bt, secret)", "bt.ID = backendTLSID(\"\", &BackendTLS{SNI: bt.SNI, Verify: bt.Verify, Refuse: bt.Refuse}, secret)")], "TestBackendTLSIdentity"),
 ("M21b backend TLS ID without the Secret's content", "proxy/table/backendtls.go", [('#%x", sec.Namespace, sec.Name, sec.UID, sec.ResourceVersion, h.Sum(nil))', '", sec.Namespace, sec.Name, sec.UID, sec.ResourceVersion)')], "TestBackendTLSSecretRotation"),
 ("M21c backend TLS ID without the namespace", "proxy/table/backendtls.go", [("bt.ID = backendTLSID(svc.Namespace, bt, secret)", "bt.ID = backendTLSID(\"\", bt, secret)")], "TestBackendTLSID", [], "./proxy/ingress/"),
 ("M21c2 backend TLS ID without the namespace (data plane)", "proxy/table/backendtls.go", [("bt.ID = backendTLSID(svc.Namespace, bt, secret)", "bt.ID = backendTLSID(\"\", bt, secret)")], "TestBackendTLSIdentitySharedEndpoint"),
 ("M21d idle connections of dropped TLS settings kept", "proxy/dataplane/server.go", [('return s.refs[addr] > 0 && (tlsKey == "" || s.tls.has(tlsKey))', "return s.refs[addr] > 0")], "TestBackendTLSSecretRotation"),
 ("M21e HTTP/1.1 pool keyed by endpoint alone", "proxy/dataplane/h1transport.go", [("func poolKey(addr string, td *tlsDest) string {\n\tif td == nil {", "func poolKey(addr string, td *tlsDest) string {\n\tif true {")], "TestBackendTLSIdentitySharedEndpoint"),
 ("M21f rewritten path sent unchecked", "proxy/dataplane/policy.go", [("out, err := p.rewrittenPath(out)", "out, err := out, error(nil)")], "TestRewriteNormalised"),
 ("M21g rewrite check splits on '/' only", "proxy/dataplane/policy.go", [('i := strings.IndexAny(rest, "/\\\\")', "i := strings.IndexByte(rest, '/')")], "TestRewriteNormalised"),
 ("M21h rewritten '//host' sent with duplicate slashes kept", "proxy/dataplane/policy.go", [('if strings.HasPrefix(out, "//") {', "if false {")], "TestRewriteNormalised"),
 ("M24a client-certificate headers forwarded", "proxy/dataplane/headers.go", [("\treturn clientCertHeader(k)\n", "\treturn false\n")], "TestClientCertHeadersNeverForwarded"),
 ("M24b a refused route served", "proxy/dataplane/policy.go", [("\tif p.Refuse != \"\" {\n", "\tif false {\n")], "TestUnenforceableProtectionRefused"),
 ("M24c unsupported protections only warned", "proxy/ingress/annotations.go", [("\ta.protections(&o)\n", "")], "TestUnenforceableProtectionRefused"),
 ("M24d an unreadable address list falls back to none", "proxy/ingress/annotations.go", [("a.refuse(o, fmt.Sprintf(\"annotation %s=%q is invalid (want CIDRs", "a.bad(key, v, \"CIDRs\"); _ = (fmt.Sprintf(\"annotation %s=%q is invalid (want CIDRs")], "TestUnenforceableProtectionRefused"),
 ("M24e Ingress CORS origins compared exactly", "proxy/dataplane/policy.go", [("\tcase c.AllowsOrigin(origin):\n", "\tcase slices.ContainsFunc(c.AllowOrigins, func(o string) bool { return strings.EqualFold(o, origin) }):\n")], "TestPolicyCORSWildcard"),
 ("M24f migrate reports an unenforced protection as unsupported", "cmd/kubectl-metalgate/migrate_ingress.go", [("if what := unenforcedProtection(name, v); what != \"\" {", "if what := unenforcedProtection(name, v); false && what != \"\" {")], "TestMigrateFlags|TestMigrateGolden", [], "./cmd/kubectl-metalgate/"),
 ("M24g migrate --strict exits 0 on BREAKING", "cmd/kubectl-metalgate/migrate.go", [("if n := m.report.breaking(); o.strict && n > 0 {", "if n := m.report.breaking(); false && o.strict && n > 0 {")], "TestMigrateFlags|TestMigrateGolden", [], "./cmd/kubectl-metalgate/"),
 ("M24h a refused auth-url not BREAKING", "cmd/kubectl-metalgate/migrate.go", [("if key != \"\" && protects(key) {", "if false && protects(key) {")], "TestMigrateFlags|TestMigrateGolden", [], "./cmd/kubectl-metalgate/"),
 ("M23a a trusted proxy's bad X-Forwarded-For makes it the client", "proxy/dataplane/clientaddr.go", [("return netip.Addr{} // a trusted proxy that names no client", "return ip"), ("	var client netip.Addr\n", "	client := ip\n"), ("		if !ok {\n			return netip.Addr{}\n		}\n		if !s.trustedAddr(ip) {", "		if !ok {\n			return client\n		}\n		if !s.trustedAddr(ip) {")], "TestClientAddress$"),
 ("M23b X-Forwarded-For hops with a port do not parse", "proxy/dataplane/clientaddr.go", [('	case strings.HasPrefix(h, "["): // "[v6]" or "[v6]:port"', "	case false:"), ('	case strings.Count(h, ":") == 1: // "v4:port"', "	case false:")], "TestClientAddress"),
 ("M23c X-Real-Ip names the trusted proxy when the client is unknown", "proxy/dataplane/headers.go", [('f.realIP = "" // unknown', "f.realIP = a.clientIP // unknown")], "TestClientAddress$"),
 ("M23d per-client connections counted before the PROXY header (the load balancer)", "proxy/dataplane/server.go", [("ln = s.limitListener(s.proxyProtocolListener(ln, pp), name)", "ln = s.proxyProtocolListener(s.limitListener(ln, name), pp)")], "TestMaxConnectionsPerProxiedClient"),
 ("M23e IPv6 clients rate-limited by address", "proxy/dataplane/ratelimit.go", [("p, _ := ip.Prefix(l.v6Bits)", "p, _ := ip.Prefix(128)")], "TestRateLimitIPv6Prefix"),
 ("M23f one rate-limit table for every namespace", "proxy/dataplane/ratelimit.go", [("	t := l.tables[ns]\n", "	t := l.tables[\"\"]\n"), ("		l.tables[ns] = t\n", "		l.tables[\"\"] = t\n")], "TestRateLimitNamespaces"),
 ("M23g eviction drops drained buckets", "proxy/dataplane/ratelimit.go", [("		if full && b.inflight == 0 {", "		if _ = full; b.inflight == 0 {")], "TestRateLimitNamespaces"),
 ("M23h redirects name whatever Host the client sent", "proxy/dataplane/redirect.go", [("	if rest != \"\" && (!validPort(rest) || rest == \":\") {", "	if true {\n		return hp, true\n	}\n	if rest != \"\" && (!validPort(rest) || rest == \":\") {")], "TestRedirectHostPolicy"),
 ("M23i auth-signin variables inserted unescaped in the query", "proxy/dataplane/redirect.go", [("		case inQuery:\n			v = url.QueryEscape(v)\n", "		case inQuery:\n")], "TestSigninEscapes"),
 ("M23j auth-signin variables inserted unescaped in the path", "proxy/dataplane/redirect.go", [('			v = strings.ReplaceAll(url.PathEscape(v), "%2F", "/")\n', "")], "TestSigninEscapes"),
 ("M23k auth-signin not validated", "proxy/ingress/annotations.go", [("		if table.ValidSignin(v) {", "		if true {")], "TestSigninValidated|TestAnnotations", [], "./proxy/ingress/"),
 ("M22a one namespace takes every auth slot", "proxy/dataplane/authslots.go", [("a.inUse < a.slots && tn.held < a.share && len(tn.waiting) == 0", "a.inUse < a.slots && len(tn.waiting) == 0"), ("len(tn.waiting) == 0 || tn.held >= a.share", "len(tn.waiting) == 0")], "TestAuthSlots$|TestBasicAuthFairness"),
 ("M22b auth slot wait unbounded", "proxy/dataplane/authslots.go", [("timer := time.NewTimer(a.wait)", "timer := time.NewTimer(time.Hour)")], "TestAuthSlotsWaitBounded|TestBasicAuthBusy/wait"),
 ("M22c auth queue unbounded", "proxy/dataplane/authslots.go", [("if len(tn.waiting) >= a.queue {", "if false {")], "TestAuthSlots$|TestBasicAuthBusy/queue"),
 ("M22d unknown users answered without hashing", "proxy/dataplane/auth.go", [("\t\t_ = c.compare(ba.Decoy, pass)\n", "")], "TestBasicAuthUnknownUserHashed"),
 ("M22e no bcrypt cost cap", "proxy/table/htpasswd.go", [("if cost > MaxBcryptCost {", "if false {")], "TestParseHtpasswd|TestBasicAuthSecrets", [], "./proxy/table/"),
 ("M22f one cache of checked passwords for every namespace", "proxy/dataplane/auth.go", [("c.ok[ns]", "c.ok[\"\"]")], "TestBasicAuthCachePerNamespace"),
 ("M23h-a the speaker's metrics port trusts loopback (on the host network: any process on the node)", "cmd/metalgate/speaker.go", [("\topts.HostNetwork = true\n", "")], "TestSpeakerAdminGuard", [], "./cmd/metalgate/"),
 ("M23h-b a host-network guard still lets loopback through", "internal/adminauth/guard.go", [("(!g.opts.HostNetwork && IsLoopback(r.RemoteAddr))", "IsLoopback(r.RemoteAddr)")], "TestGuard$", [], "./internal/adminauth/"),
 ("M23h-c kubectl metalgate reads the speakers without a token", "cmd/kubectl-metalgate/announcers.go", [("\t\theader = http.Header{\"Authorization\": {\"Bearer \" + tok}}\n", "\t\t_ = tok\n")], "TestAgainstAPIServer", [], "./cmd/kubectl-metalgate/"),
 ("M23h-d kubectl metalgate sends the user's own token when the reader's is there", "cmd/kubectl-metalgate/speakertoken.go", [("\treader := s.reader\n", "\tif own, _ := s.kubeconfig(); own != \"\" {\n\t\treturn own, nil\n\t}\n\treader := s.reader\n")], "TestSpeakerTokenChoice", [], "./cmd/kubectl-metalgate/"),
 ("M27c1 manager stop returns before the manager has stopped", "internal/testenv/manager.go", [("stop = func() { once.Do(func() { cancel(); <-done }) }", "stop = func() { once.Do(func() { cancel() }) }")], "TestStartManager", [], "./internal/testenv/"),
 ("M27c2 PollEvery loses the last error", "internal/testenv/eventually.go", [('return fmt.Errorf("not so after %v: %w", timeout, err)', 'return fmt.Errorf("not so after %v", timeout)')], "TestPollEvery|TestEventuallyEvery", [], "./internal/testenv/"),
 ("M27c3 NDP socket reopened without rejoining its solicited-node groups", "speaker/layer2/ndp.go", [("opened: func(*ndpSocket) { r.syncGroupsLocked() },", "opened: func(*ndpSocket) {},")], "TestRespondersReopen", [], "./speaker/layer2/"),
 ("M27c4 a failed responder socket is not reopened", "speaker/layer2/socket.go", [("closed := s.closed\n", "closed := s.closed || true\n")], "TestRespondersReopen", [], "./speaker/layer2/"),
 ("M27c5 the pool the controller recorded is ignored (both modes)", "speaker/config/config.go", [('\tif annotated != "" {\n\t\tfor _, p := range pools {\n\t\t\tif a := p.pool()', '\tif false {\n\t\tfor _, p := range pools {\n\t\t\tif a := p.pool()')], "TestAnnouncedVIPs", [], "./speaker/config/"),
 ("M27c6 the CRD accepts a BGPPeer with a VRF", "config/crd/bases/metalgate.io_bgppeers.yaml", [("rule: self.size() == 0", "rule: 'true'")], "TestRefused/vrf|TestMetalLBManifests", [], "./api/v1alpha1/"),
 ("M27c7 the CRD accepts BFD echo mode", "config/crd/bases/metalgate.io_bfdprofiles.yaml", [("function; remove echoMode or set it to false'\n                  rule: '!self'", "function; remove echoMode or set it to false'\n                  rule: 'true'")], "TestRefused/BFD_echoMode|TestMetalLBManifests", [], "./api/v1alpha1/"),
 ("M25pa kubectl metalgate pools/check/migrate take -n silently (once metalgate's namespace)", "cmd/kubectl-metalgate/main.go", [("\tcase namespaceNone:\n\t\tif o.namespaceSet {", "\tcase namespaceNone:\n\t\tif false {")], "TestUsageErrors|TestMigrateFlags", [], "./cmd/kubectl-metalgate/"),
 ("M25pb kubectl metalgate allocations ignores -n", "cmd/kubectl-metalgate/commands.go", [("e.c.List(ctx, &list, client.InNamespace(e.o.objectNamespace()))", "e.c.List(ctx, &list)")], "TestAgainstAPIServer", [], "./cmd/kubectl-metalgate/"),
 ("M25pc kubectl metalgate takes an unknown -o (prints the table)", "cmd/kubectl-metalgate/output.go", [("\tcase outputTable, outputWide, outputJSON, outputYAML:\n", "\tdefault:\n")], "TestUsageErrors", [], "./cmd/kubectl-metalgate/"),
 ("M25pd kubectl metalgate -o json prints items: null", "cmd/kubectl-metalgate/output.go", [("\t\titems = []R{} // \"items\": [], never null\n", "")], "TestOutputEmpty", [], "./cmd/kubectl-metalgate/"),
 ("M25pe kubectl metalgate announcers -o json mixes warnings into the document", "cmd/kubectl-metalgate/announcers.go", [("\t\tout = warn\n", "\t\t_ = warn\n")], "TestAgainstAPIServer", [], "./cmd/kubectl-metalgate/"),
 ("M25pf kubectl metalgate help on standard error", "cmd/kubectl-metalgate/main.go", [("\t\tfmt.Fprint(stdout, text)\n", "\t\tfmt.Fprint(stderr, text)\n")], "TestHelp$", [], "./cmd/kubectl-metalgate/"),
 ("M25pg kubectl metalgate backends -o json mixes a Gateway's proxy that did not answer into the document", "cmd/kubectl-metalgate/backends.go", [('fmt.Fprintf(msgs, "Gateway %s: proxy %s did not answer: %v\\n"', 'fmt.Fprintf(out, "Gateway %s: proxy %s did not answer: %v\\n"')], "TestBackendsHTTPRouteAgainstAPIServer", [], "./cmd/kubectl-metalgate/"),
 ("M24ra unrouted requests labelled by the client's Host", "proxy/dataplane/handler.go", [("\t\trs = m.unrouted\n", "\t\trs = m.newSeries(routeLabelValues{r.Host})\n")], "TestMetricsLabelsBounded"),
 ("M24rb method label not bounded", "proxy/dataplane/routemetrics.go", [("l[0], l[1], l[2], l[3], methods[mi], codeLabel(status))", "l[0], l[1], l[2], l[3], method, codeLabel(status))")], "TestMetricsLabelsBounded"),
 ("M24rc routed requests counted as unrouted", "proxy/dataplane/routemetrics.go", [("\tif r == nil {\n\t\treturn m.unrouted\n", "\tif true {\n\t\treturn m.unrouted\n")], "TestMetricsPerRoute"),
 ("M24rd a removed route's series kept", "proxy/dataplane/routemetrics.go", [("\t\t\t\tm.deleteSeries(l)\n", "")], "TestMetricsPerRoute"),
 ("M24re the split or canary backend's Service not labelled", "proxy/dataplane/handler.go", [("if m := s.opts.Metrics; m != nil && be != route.Backend {", "if m := s.opts.Metrics; m != nil && false {")], "TestMetricsSplitService"),
 ("M24rf failed TLS handshakes not counted", "proxy/dataplane/metrics.go", [('if strings.Contains(line, "TLS handshake error") &&', 'if false &&')], "TestTLSHandshakeMetrics"),
 ("M24rg access log written in the request", "proxy/dataplane/accesslog.go", [("\t\tgo l.drain()\n", "\t\tl.drain()\n")], "TestAccessLogSlowOutput"),
 ("M24rh dropped access log lines not counted", "proxy/dataplane/accesslog.go", [("\t\tl.dropped(1)\n", "")], "TestAccessLogSlowOutput"),
 ("M24ri quotes not escaped in the access log", "proxy/dataplane/accesslog.go", [("case c == '\"' || c == '\\\\':", "case false:")], "TestAccessLogHostile|TestAppendJSONString"),
 ("M24rj invalid UTF-8 written raw in the access log", "proxy/dataplane/accesslog.go", [("\t\t\tb = append(b, `\\ufffd`...)\n", "\t\t\tb = append(b, s[i])\n")], "TestAccessLogHostile"),
 ("M24rk query logged by default", "proxy/dataplane/accesslog.go", [("i >= 0 && !l.query {", "i >= 0 && false {")], "TestAccessLogFields"),
 ("M24rl access log sampling ignored", "proxy/dataplane/accesslog.go", [("\tif l.sample >= 1 {\n", "\tif true {\n")], "TestAccessLogSample"),
 ("M24rm invalid traceparent forwarded", "proxy/dataplane/headers.go", [('\t\t"Traceparent", "Tracestate", // forwarded after validation (trace.go)\n', "")], "TestTraceContext"),
 ("M24ro an unrouted request's client logged with its port", "proxy/dataplane/accesslog.go", [("\t\t\ta.clientIP, a.trusted = s.client(r)\n", "")], "TestAccessLogUnrouted"),
 ("M24rp Gateway routes' identity not read", "proxy/dataplane/routemetrics.go", [("return r.Source.Namespace, r.Source.Kind, r.Source.Name", "return r.Source.Namespace, table.KindIngress, r.Source.Name")], "TestMetricsGatewayRoute"),
 ("M24rn all-zero trace IDs accepted", "proxy/dataplane/trace.go", [("return !allZero(v[3:35]) && !allZero(v[36:52])", "return true")], "TestTraceContext"),
 ("M27sa routes attach to listeners the verdict refused", "proxy/gatewayapi/translate.go", [("\t\tif !b.accepted[i] {\n", "\t\tif false {\n")], "TestRoutesAttachOnlyToAcceptedListeners|TestTranslateGolden", [], "./proxy/gatewayapi/"),
 ("M25d1 no Connection: close while draining", "proxy/dataplane/server.go", [('\t\tw.Header()["Connection"] = []string{"close"}\n', "")], "TestShutdownDrains"),
 ("M25d2 no drain delay: the listener closes when shutdown begins", "proxy/dataplane/server.go", [("if d := s.opts.ShutdownDelay; d > 0 {", "if d := s.opts.ShutdownDelay; false && d > 0 {")], "TestShutdownDrains|TestShutdownDelayDefault"),
 ("M25d3 readiness ignores the drain", "cmd/metalgate/proxy.go", [("\t\tif dp.Draining() {", "\t\tif false && dp.Draining() {")], "TestProxyDrainsOnShutdown", [], "./cmd/metalgate/"),
 ("M25d4 the manager's own election again (a lost Lease ends the process)", "cmd/metalgate/proxy.go", [("LeaderElection:         false, // see above: the status writer has its own Lease", "LeaderElection: opts.LeaderElect, LeaderElectionID: opts.LeaderElectionID + \"-manager\", LeaderElectionNamespace: copts.StatusElection.Namespace, LeaseDuration: &opts.LeaseDuration, RenewDeadline: &opts.RenewDeadline, RetryPeriod: &opts.RetryPeriod,")], "TestProxyOutlivesLeaseAndAPIServer", [], "./cmd/metalgate/"),
 ("M25d5 the publisher outlives its term", "proxy/controlplane/statuswriter.go", [("if err := t.w.run(ctx, in); err != nil {", "if err := t.w.run(context.WithoutCancel(ctx), in); err != nil {")], "TestProxyOutlivesLeaseAndAPIServer", [], "./cmd/metalgate/"),
 ("M25d6 no new campaign after a lost Lease", "proxy/controlplane/statuswriter.go", [("\t\tif ctx.Err() != nil {\n\t\t\tif t.led() {", "\t\tif true {\n\t\t\tif t.led() {")], "TestProxyOutlivesLeaseAndAPIServer", [], "./cmd/metalgate/"),
 ("M25d7 the publisher outlives its term, the gauge says it stopped", "proxy/controlplane/statuswriter.go", [("if err := t.w.run(ctx, in); err != nil {", "if err := t.w.run(context.WithoutCancel(ctx), in); err != nil {"), ("\t<-done\n\tt.w.close()\n", "")], "TestProxyOutlivesLeaseAndAPIServer", [], "./cmd/metalgate/"),
 ("M27d1 a foreign writer never stopped: rewrites until the window forgets", "proxy/controlplane/decide.go", [("if !forced && (n >= in.Policy.MaxConflicts || st.stops > 0) {", "if !forced && st.stops > 0 {")], "TestDecide$", [], "./proxy/controlplane/"),
 ("M27d2 no address: a foreign status cleared too", "proxy/controlplane/decide.go", [("d.Reason = \"no address: \" + in.NoAddress\n\t\tif in.Mine && len(cur) > 0 {", "d.Reason = \"no address: \" + in.NoAddress\n\t\tif len(cur) > 0 {")], "TestDecide$", [], "./proxy/controlplane/"),
 ("M27d3 another writer's value replaced without the live re-check's verdict", "proxy/controlplane/decide.go", [("newer than our cache.\n\t\tif in.Live == nil {\n\t\t\treturn d.recheck(st)\n\t\t}\n\t\tif in.Live.Lost {", "newer than our cache.\n\t\tif in.Live == nil {\n\t\t\treturn d.recheck(st)\n\t\t}\n\t\tif false {")], "TestDecide$", [], "./proxy/controlplane/"),
 ("M27d4 the status-owner annotation naming another writer ignored", "proxy/controlplane/decide.go", [("if owner != in.FieldManager && owner != in.Self.String() {", "if false {")], "TestDecide$", [], "./proxy/controlplane/"),
 ("M27d5 a yield reported on every sync", "proxy/controlplane/decide.go", [('if key := y.Why + ":" + y.To; st.reported != key {', 'if key := y.Why + ":" + y.To; true {')], "TestDecide$", [], "./proxy/controlplane/"),
 ("M27d6 the writer ignores decide's clear", "proxy/controlplane/status.go", [("\tcase actClear:\n\t\tp.write(ctx, log, ing, nil, \"cleared\")\n", "")], "TestStatusPublishesOwnServiceAddress", [], "./proxy/controlplane/"),
 ("M26h1 HSTS sent when a client's X-Forwarded-Proto says https", "proxy/dataplane/hsts.go", [("\tif r.TLS == nil || !route.TLS {", "\tif r.TLS == nil && r.Header.Get(\"X-Forwarded-Proto\") != \"https\" || !route.TLS {")], "TestHSTS$"),
 ("M26h2 a backend's HSTS passes over plain HTTP", "proxy/dataplane/hsts.go", [("\tdefault:\n\t\tdelete(h, headerSTS)\n", "\tdefault:\n")], "TestHSTS$"),
 ("M26h3 a backend's HSTS kept beside the proxy's", "proxy/dataplane/hsts.go", [("\t\th[headerSTS] = s.hsts\n", "\t\th[headerSTS] = append(h[headerSTS], s.hsts...)\n")], "TestHSTS$"),
 ("M26h4 HSTS on by default no more", "proxy/dataplane/options.go", [("\t\to.HSTS = DefaultHSTS\n", "\t\to.HSTS = \"-\"\n")], "TestHSTS$"),
 ("M26h5 --hsts-include-subdomains ignored", "cmd/metalgate/proxy.go", [("\tif subdomains {\n", "\tif false {\n")], "TestHSTSValue", [], "./cmd/metalgate/"),
 ("M26h6 no default body size on Ingress routes", "proxy/dataplane/handler.go", [("\t\tlimit = s.opts.IngressMaxBodyBytes\n", "\t\tlimit = 0\n")], "TestDefaultBodySize$"),
 ("M26h7 the Ingress body size default on Gateway routes", "proxy/dataplane/handler.go", [("\tif limit == 0 && !route.Source.IsGateway() {\n", "\tif limit == 0 {\n")], "TestDefaultBodySize$"),
 ("M26h8 --max-body-size alone no longer bounds Ingress routes", "cmd/metalgate/proxy.go", [("\tcase maxSize != \"\" && maxSize != \"0\":\n", "\tcase false:\n")], "TestIngressBodySize", [], "./cmd/metalgate/"),
 ("M26h9 affinity cookie Secure from a client's X-Forwarded-Proto", "proxy/dataplane/handler.go", [("\ta.https = r.TLS != nil\n", "\ta.https = r.Header.Get(\"X-Forwarded-Proto\") == \"https\"\n")], "TestAffinityCookieAttributes$"),
 ("M26h10 affinity cookie SameSite=None without Secure", "proxy/ingress/annotations.go", [("\t\tc.Secure = true // browsers refuse SameSite=None without Secure\n", "")], "TestAffinityCookieAttributes$"),
 ("M26h11 affinity cookie path unchecked (attribute injection)", "proxy/ingress/annotations.go", [("\t\tif validCookiePath(v) {\n", "\t\tif true {\n")], "TestAnnotations$", [], "./proxy/ingress/"),
 ("M26h12 affinity cookie attributes ignored", "proxy/dataplane/upstream.go", [("Secure: at.Secure || a.https, MaxAge: int(at.MaxAge)}", "Secure: a.https}")], "TestAffinityCookieAttributes$"),
 ("M26h13 Ingresses sharing a Service share cookie attributes", "proxy/table/options.go", [("\t\tif b.AffinityCookieAttrs != (CookieAttrs{}) {\n", "\t\tif false {\n")], "TestAffinityCookieAttrsSplitBackends", [], "./proxy/ingress/"),
 ("M24t1 span attributes not made UTF-8 (one bad path fails a batch's export)", "proxy/dataplane/spans.go", [('return strings.ToValidUTF8(s, "\\uFFFD")', "return strings.Clone(s)")], "TestSpans$"),
 ("M24t2 an untrusted client's sampled flag decides", "proxy/tracing/tracing.go", [("trusted && psc.IsValid()", "trusted || psc.IsValid()")], "TestSpans$"),
 ("M24t3 the backend gets the client's parent, not the proxy's span", "proxy/dataplane/spans.go", [("\ta.traceparent = traceparentOf(sc)\n", "\t_ = traceparentOf(sc)\n")], "TestSpans$"),
 ("M24e1 a rebuilt table resets every Service's endpoints-changed time", "proxy/dataplane/backendmetrics.go", [("\t\t\tcontinue // the same endpoints under a rebuilt table\n", "\t\t\t_ = 0 // the same endpoints under a rebuilt table\n")], "TestBackendEndpointsMetric$|TestEndpointChanges$"),
 ("M24e2 ejected endpoints not counted", "proxy/dataplane/backendmetrics.go", [("if !e.Healthy(now) {", "if false && !e.Healthy(now) {")], "TestBackendEndpointsMetric$"),
 ("M24x1 certificate expiry without the owner namespace", "proxy/table/certificates.go", [("add(hr.cert, ServedCertificate{Namespace: hr.namespace, Host: host})", "add(hr.cert, ServedCertificate{Host: host})")], "TestCertificateExpiryMetric"),
 ("M26a1 outside auth dialer lets loopback through (only loopback: the test never dials another address)", "proxy/dataplane/outsideauth.go", [("\t\treturn policy(ap.Addr())\n", "\t\tif ap.Addr().Unmap().IsLoopback() {\n\t\t\treturn nil\n\t\t}\n\t\treturn policy(ap.Addr())\n")], "TestOutsideAuthRefused"),
 ("M26a2 outside auth https not verified", "proxy/dataplane/outsideauth.go", [("td.conf = &tls.Config{MinVersion: tls.VersionTLS12,", "td.conf = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12,")], "TestOutsideAuth$"),
 ("M26a3 outside auth response head not capped", "proxy/dataplane/outsideauth.go", [("maxHeaderBytes: opts.MaxResponseHeaderBytes, max1xx: opts.Max1xxResponses, discarded: discarded,", "maxHeaderBytes: 1 << 30, max1xx: opts.Max1xxResponses, discarded: discarded,")], "TestOutsideAuth$"),
 ("M26a4 auth-url to another namespace without a grant", "proxy/ingress/authurl.go", [("if ns != id.Namespace && !refgrant.Allows(", "if false && !refgrant.Allows(")], "TestExternalAuthURL|TestExternalAuthGrantRevoked", [], "./proxy/ingress/"),
 ("M26a5 auth-url to an unlisted outside host", "proxy/ingress/authurl.go", [("\t\tif !b.in.ExternalAuthHosts.Allows(host) {\n", "\t\tif false {\n")], "TestExternalAuthURL", [], "./proxy/ingress/"),
 ("M26a6 auth-url with user information", "proxy/ingress/authurl.go", [("\tcase u.User != nil:\n", "\tcase false:\n")], "TestExternalAuthURL", [], "./proxy/ingress/"),
 ("M26a7 a listed suffix allows the suffix itself", "proxy/table/authhosts.go", [("if len(name) > len(s) && strings.HasSuffix(name, s) {", "if strings.HasSuffix(\".\"+name, s) {")], "TestExternalAuthURL", [], "./proxy/ingress/"),
 ("M26a8 migrate calls a Service of MetalLB's class one to one", "cmd/kubectl-metalgate/migrate_metallb.go", [('class != "" && class != controllers.DefaultLBClass {', 'false && class != controllers.DefaultLBClass {')], "TestMigrateGolden", [], "./cmd/kubectl-metalgate/"),
 ("M29b1 BackendTLSPolicy SANs not checked", "proxy/dataplane/backendtls.go", [("return matchSANs(cs.PeerCertificates[0], sans)", "return nil")], "TestGatewayBackendTLSPolicy$"),
 ("M29b2 BackendTLSPolicy SANs do not replace the hostname", "proxy/dataplane/backendtls.go", [("\t\t\tname = \"\" // the chain is checked here, the names by matchSANs\n", "")], "TestGatewayBackendTLSPolicy$"),
 ("M29b3 BackendTLSPolicy TLS ID without the hostname", "proxy/table/policytls.go", [("bt.ID = backendTLSID(ns, &bt, caSource)", "bt.ID = backendTLSID(ns, &BackendTLS{SNI: bt.SNI, Verify: bt.Verify, Refuse: bt.Refuse}, caSource)")], "TestGatewayBackendTLSPolicyIdentity"),
 ("M29b4 BackendTLSPolicy CA ConfigMap of any namespace", "proxy/gatewayapi/backendtls.go", [("if c.Namespace == id.Namespace && c.Name == id.Name {", "if c.Name == id.Name {")], "TestGatewayBackendTLSPolicy$"),
 ("M29b5 BackendTLSPolicy conflict: the newest wins", "proxy/gatewayapi/backendtls.go", [("return a.CreationTimestamp.Before(&c.CreationTimestamp)", "return c.CreationTimestamp.Before(&a.CreationTimestamp)")], "TestGatewayBackendTLSPolicy$"),
 ("M29b6 BackendTLSPolicy TLS ID without the CA content", "proxy/gatewayapi/backendtls.go", [("sha256.Sum256([]byte(ca)))", "sha256.Sum256(nil))")], "TestBackendTLSPolicySettings", [], "./proxy/gatewayapi/"),
 ("M29b7 BackendTLSPolicy ancestor entry moved to the end on every write", "controllers/gateway/backendtls.go", [("\treturn slices.Insert(out, at, ours)", "\treturn append(out, ours)")], "TestMergePolicyAncestors", [], "./controllers/gateway/"),
 ("M29b8 Gateway client certificate Secret of another namespace read without a ReferenceGrant", "proxy/gatewayapi/backendtls.go", [('case name.Namespace != gw.Namespace && !Granted(grants, "Gateway", gw.Namespace, "Secret", name):', "case false:")], "TestGatewayBackendClientCertificate"),
 ("M29b9 Gateway client certificate not in the backend TLS ID", "proxy/gatewayapi/backendtls.go", [('bt.Certificate, source = cc.cert, source+",client="+cc.version', "bt.Certificate = cc.cert")], "TestBackendClientCertificateStatus", [], "./proxy/gatewayapi/"),
]
only = sys.argv[1:]
failed = 0
for name, f, reps, test, *extra in M:
    flags = extra[0] if extra else []
    pkg = extra[1] if len(extra) > 1 else "./proxy/dataplane/"
    if only and not any(name.startswith(o) for o in only): continue
    orig = open(f).read()
    s = orig
    ok = True
    for a, b in reps:
        if a not in s:
            print(f"{name}: PATTERN NOT FOUND: {a!r}"); ok = False
        s = s.replace(a, b)
    if not ok:
        failed += 1
        continue
    open(f, 'w').write(s)
    r = subprocess.run(["go", "test", "-count=1", "-timeout", "300s", *flags, "-run", test, pkg], capture_output=True, text=True)
    open(f, 'w').write(orig)
    verdict = "caught (test fails)" if r.returncode != 0 else "NOT CAUGHT"
    if r.returncode == 0:
        failed += 1
    elif "[build failed]" in r.stdout + r.stderr or "[setup failed]" in r.stdout + r.stderr:
        # A mutation that does not compile proves nothing: fix the replacement.
        lines = (r.stdout + r.stderr).strip().splitlines()
        verdict = "MUTATION DOES NOT BUILD: " + (lines[1] if len(lines) > 1 else "")
        failed += 1
    first = [l for l in r.stdout.splitlines() if "_test.go" in l][:1]
    print(f"{name} -> {test}: {verdict} {first[0].strip()[:150] if first else ''}", flush=True)

subprocess.run(["git", "-C", root, "worktree", "remove", "--force", work])
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failed else 0)
