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
 ("M26a9 outside auth allows link-local (the test guard reports it, nothing is connected)", "proxy/dataplane/outsideauth.go", [("\tcase a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():\n", "\tcase false:\n"), ("\tcase !a.IsGlobalUnicast():\n", "\tcase false && !a.IsGlobalUnicast():\n")], "TestOutsideAuthRefused$"),
 ("M24x2 certificate expiry without the Secret", "proxy/table/certificates.go", [("add(hr.cert, ServedCertificate{Namespace: hr.namespace, Host: host, Secret: hr.certSecret})", "add(hr.cert, ServedCertificate{Namespace: hr.namespace, Host: host})")], "TestCertificateExpiryMetric"),
 ("M24x1 certificate expiry without the owner namespace", "proxy/table/certificates.go", [("add(hr.cert, ServedCertificate{Namespace: hr.namespace, Host: host, Secret: hr.certSecret})", "add(hr.cert, ServedCertificate{Host: host, Secret: hr.certSecret})")], "TestCertificateExpiryMetric"),
 ("M26a1 outside auth dialer lets loopback through (only loopback: the test never dials another address)", "proxy/dataplane/outsideauth.go", [("\t\treturn policy(ap.Addr())\n", "\t\tif ap.Addr().Unmap().IsLoopback() {\n\t\t\treturn nil\n\t\t}\n\t\treturn policy(ap.Addr())\n")], "TestOutsideAuthRefused"),
 ("M26a2 outside auth https not verified", "proxy/dataplane/outsideauth.go", [("td.conf = &tls.Config{MinVersion: tls.VersionTLS12,", "td.conf = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12,")], "TestOutsideAuth$"),
 ("M26a3 outside auth response head not capped", "proxy/dataplane/outsideauth.go", [("maxHeaderBytes: opts.MaxResponseHeaderBytes, max1xx: opts.Max1xxResponses, discarded: discarded,", "maxHeaderBytes: 1 << 30, max1xx: opts.Max1xxResponses, discarded: discarded,")], "TestOutsideAuth$"),
 ("M26a4 auth-url to another namespace without a grant", "proxy/ingress/authurl.go", [("if ns != id.Namespace && !refgrant.Allows(", "if false && !refgrant.Allows(")], "TestExternalAuthURL|TestExternalAuthGrantRevoked", [], "./proxy/ingress/"),
 ("M26a5 auth-url to an unlisted outside host", "proxy/ingress/authurl.go", [("\t\tif !b.in.ExternalAuthHosts.Allows(host) {\n", "\t\tif false {\n")], "TestExternalAuthURL", [], "./proxy/ingress/"),
 ("M26a6 auth-url with user information", "proxy/ingress/authurl.go", [("\tcase u.User != nil:\n", "\tcase false:\n")], "TestExternalAuthURL", [], "./proxy/ingress/"),
 ("M26a7 a listed suffix allows the suffix itself", "proxy/table/authhosts.go", [("if len(name) > len(s) && strings.HasSuffix(name, s) {", "if strings.HasSuffix(\".\"+name, s) {")], "TestExternalAuthURL", [], "./proxy/ingress/"),
 ("M26a8 migrate calls a Service of MetalLB's class one to one", "cmd/kubectl-metalgate/migrate_metallb.go", [('class != "" && class != controllers.DefaultLBClass {', 'false && class != controllers.DefaultLBClass {')], "TestMigrateGolden", [], "./cmd/kubectl-metalgate/"),
 ("M26c1 client auth: a request may use a connection made for another SNI setting", "proxy/dataplane/clientauth.go", [("sni == nil || sni.ID != ca.ID", "false && sni == nil")], "TestClientCertificateAuthentication"),
 ("M26c2 client auth: the handshake never asks for a certificate", "proxy/dataplane/clientauth.go", [("if ca == nil || ca.Refuse != \"\" || !ca.Policy.Mode.RequestsCertificate() {", "if true {")], "TestClientCertificateAuthentication"),
 ("M26c3 client auth: no depth limit", "proxy/clientcert/verify.go", [("if len(best)-1 > depth {", "if false {")], "TestClientCertificateAuthentication"),
 ("M26c3b client auth: no depth limit (clientcert)", "proxy/clientcert/verify.go", [("if len(best)-1 > depth {", "if false {")], "TestVerify", [], "./proxy/clientcert/"),
 ("M26c4 client auth: on lets a request without a certificate through", "proxy/clientcert/policy.go", [("\t\tcase None:\n\t\t\treturn RefuseNoCertificate\n", "")], "TestClientCertificateAuthentication"),
 ("M26c5 client auth: any key usage", "proxy/clientcert/verify.go", [("KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}", "KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}")], "TestClientCertificateAuthentication"),
 ("M26c6 client auth: the CN of an unverified certificate matches", "proxy/clientcert/policy.go", [("(r.Status != Success || !p.MatchCN.MatchString(SubjectDN(r.Leaf)))", "!p.MatchCN.MatchString(SubjectDN(r.Leaf))")], "TestDecide", [], "./proxy/clientcert/"),
 ("M26c7 client auth: the backend is not told", "proxy/dataplane/headers.go", [("\t\ta.clientCert.emit(add)\n", "")], "TestClientCertificateAuthentication"),
 ("M26c8 client auth: a CA Secret of another namespace is read", "proxy/table/clientauth.go", [("if ns != src.Namespace {", "if false {")], "TestClientAuthBuild", [], "./proxy/ingress/"),
 ("M26c9 client auth: a subject DN with CR LF unescaped", "proxy/clientcert/headers.go", [("\t\t\treturn escapeBytes(s)\n", "")], "TestClientCertificateAuthentication"),
 ("M26c10 client auth: no revocation check", "proxy/clientcert/verify.go", [("if why := revoked(a, best, now); why != \"\" {", "if why := revoked(a, best, now); false && why != \"\" {")], "TestVerify", [], "./proxy/clientcert/"),
 ("M26c11 client auth: plain HTTP skips the check", "proxy/dataplane/clientauth.go", [("\tif ca == nil {\n\t\treturn true\n\t}\n\tif ca.Refuse", "\tif ca == nil || r.TLS == nil {\n\t\treturn true\n\t}\n\tif ca.Refuse")], "TestClientCertificateAuthentication"),
 ("M26c12 client auth: an invalid CN pattern is dropped, not refused", "proxy/ingress/clienttls.go", [("\t\t\ta.refuse(o, fmt.Sprintf(\"annotation %s=%q is invalid (want CN= and an RE2 regular expression: %v); every request is refused (403) until it is fixed\", key, v, err))\n\t\t\treturn\n", "\t\t\ta.bad(key, v, \"CN=\")\n")], "TestClientTLSAnnotations", [], "./proxy/ingress/"),
 ("M26c13 client auth: a client's own ssl-client-verify reaches the backend", "proxy/dataplane/headers.go", [("\treturn clientCertHeader(k)\n}", "\treturn false\n}")], "TestClientCertificateAuthentication"),
 ("M26c14 client auth: a rotated CA Secret keeps the old identity", "proxy/table/clientauth.go", [("secret = secretVersion(sec, \"ca.crt\", \"ca.crl\")", "secret = ns + \"/\" + name")], "TestClientAuthBuild", [], "./proxy/ingress/"),
 ("M25g-a takeover ARP with a broadcast target hardware address (Linux clients ignore it within locktime)", "speaker/layer2/arp.go", [("arp.NewPacket(arp.OperationReply, r.ifi.HardwareAddr, ip, r.ifi.HardwareAddr, ip)", "arp.NewPacket(arp.OperationReply, r.ifi.HardwareAddr, ip, bcast, ip)")], "TestGracefulStopHandsOver", [], "./speaker/netns/"),
 ("M25g-a2 takeover ARP with a broadcast target hardware address (unit)", "speaker/layer2/arp.go", [("arp.NewPacket(arp.OperationReply, r.ifi.HardwareAddr, ip, r.ifi.HardwareAddr, ip)", "arp.NewPacket(arp.OperationReply, r.ifi.HardwareAddr, ip, bcast, ip)")], "TestARPAnswersOwnedAddressesOnly", [], "./speaker/layer2/"),
 ("M25g-b a stopping speaker exits without the memberlist leave (peers wait for failure detection)", "speaker/speaker.go", [("\terr := s.opts.Membership.Leave(s.opts.LeaveTimeout)\n", "\tvar err error\n")], "TestGracefulStopHandsOver", [], "./speaker/netns/"),
 ("M25g-c a lost Lease ends the controller process", "cmd/metalgate/controller.go", [("\t\tlost()\n\t}\n}", "\t\tlost()\n\t\treturn errors.New(\"leader election lost\")\n\t}\n}")], "TestControllerOutlivesLostLease", [], "./cmd/metalgate/"),
 ("M25g-d the old term outlives the Lease and the campaign goes on without waiting for it", "cmd/metalgate/controller.go", [("termCtx, cancel := context.WithCancel(tctx)", "termCtx, cancel := context.WithCancel(context.WithoutCancel(tctx))"), ("\t\tend := g.wait()\n", "\t\tend := termEnd{}\n")], "TestControllerOutlivesLostLease", [], "./cmd/metalgate/"),
 ("M25g-e a graceful stop without graceful restart leaves the sessions to the closing sockets (no NOTIFICATION)", "speaker/bgp/speaker.go", [("\t\tif e.cfg.GracefulRestart {\n\t\t\ts.log.Info(\"Leaving BGP sessions open", "\t\tif e.cfg.GracefulRestart || true {\n\t\t\ts.log.Info(\"Leaving BGP sessions open")], "TestFRR/graceful_stop_without", [], "./speaker/bgp/"),
 ("M26e1 direct path streams an intercepted status", "proxy/dataplane/direct.go", [("if p := s.pageFor(a, resp.StatusCode); p != nil {", "if p := s.pageFor(a, resp.StatusCode); false && p != nil {")], "TestErrorPages/503_with_an_endless_body/direct"),
 ("M26e2 reverse path streams an intercepted status", "proxy/dataplane/upstream.go", [("if p := s.pageFor(a, resp.StatusCode); p != nil {", "if p := s.pageFor(a, resp.StatusCode); false && p != nil {")], "TestErrorPages/503_with_an_endless_body/reference"),
 ("M26e3 a client's X-Code reaches the error backend", "proxy/dataplane/errorpages.go", [('h["X-Code"] = []string{strconv.Itoa(code)}', 'h["X-Code"] = append(in.Header.Values("X-Code"), strconv.Itoa(code))')], "TestErrorPages/a_client's_own_X-Code"),
 ("M26e4 no error page size cap", "proxy/dataplane/errorpages.go", [("case len(body) > maxErrorPageBytes:", "case false:")], "TestErrorPages/error_backend_page_too_large"),
 ("M26e5 no error page timeout", "proxy/dataplane/errorpages.go", [("ctx, cancel := context.WithTimeout(in.Context(), s.opts.ErrorPageTimeout)", "ctx, cancel := context.WithCancel(in.Context())")], "TestErrorPages/error_backend_hangs"),
 ("M26e6 a request with a body passed on", "proxy/dataplane/nextupstream.go", [("return replayable && (idempotent ||", "return (idempotent ||")], "TestNextUpstream/PUT_with_a_body"),
 ("M26e7 non-idempotent passed on without non_idempotent", "proxy/dataplane/nextupstream.go", [("return replayable && (idempotent || p.on&table.NextNonIdempotent != 0) &&", "return replayable &&")], "TestNextUpstream/POST_without_non_idempotent"),
 ("M26e8 balanced affinity names the endpoint", "proxy/dataplane/router.go", [('if be.Balance.AffinityCookie != "" && !persistentAffinity(be) {', "if false {")], "TestAffinityMode/balanced"),
 ("M26e9 tries not bounded", "proxy/dataplane/nextupstream.go", [("if p.tries > 0 && try+1 >= p.tries {", "if false {")], "TestNextUpstreamPolicy"),
 ("M26e10 the patched table keeps the old error backend", "proxy/table/patch.go", [("t.ErrorBackend = m.backend(prev.ErrorBackend)", "t.ErrorBackend = prev.ErrorBackend")], "TestPatchEndpointsEqualsBuild", [], "./proxy/ingress/"),
 ("M26e11 patched error pages keep the old backend", "proxy/table/patch.go", [("pages := m.errorPages(r.Options.Policy.ErrorPages)", "pages := r.Options.Policy.ErrorPages")], "TestPatchEndpointsEqualsBuild", [], "./proxy/ingress/"),
 ("M29t1 TLS passthrough falls through to a wider listener", "proxy/table/gatewaytls.go", [("\t\tanswered = true\n", "")], "TestGatewayTLSPassthrough$"),
 ("M29t2 TLS passthrough falls through to a wider listener (table)", "proxy/table/gatewaytls.go", [("\t\tanswered = true\n", "")], "TestGatewayTLSRoutePassthrough$", [], "./proxy/gatewayapi/"),
 ("M29t3 a passthrough miss terminated by the HTTPS server", "proxy/dataplane/gatewaypassthrough.go", [("\tl.track(c, false)\n\tc.Close()\n}", "\tl.track(c, false)\n\tl.serveTLS(c, hello)\n}")], "TestGatewayTLSPassthrough$"),
 ("M29t4 no ClientHello deadline on passthrough ports (slowloris)", "proxy/dataplane/gatewaypassthrough.go", [("\tif d := l.s.opts.ReadHeaderTimeout; d > 0 {\n", "\tif d := l.s.opts.ReadHeaderTimeout; d < 0 {\n")], "TestGatewayTLSPassthrough$"),
 ("M29t5 TLSRoutes admitted by HTTP and HTTPS listeners", "proxy/gatewayapi/translate.go", [("\t\tif !passthroughListener(*l) {\n\t\t\treturn fmt.Sprintf(\"protocol %s does not serve %ss (TLS", "\t\tif false {\n\t\t\treturn fmt.Sprintf(\"protocol %s does not serve %ss (TLS")], "TestTranslateGolden$", [], "./proxy/gatewayapi/"),
 ("M29t6 TLS listener in mode Terminate accepted", "proxy/gatewayapi/listeners.go", [("\t\t\tif !passthroughListener(l) {\n\t\t\t\t// Terminating", "\t\t\tif false {\n\t\t\t\t// Terminating")], "TestTranslateGolden$", [], "./proxy/gatewayapi/"),
 ("M29t7 TLS Passthrough listener indexed as an HTTP one", "proxy/table/gatewaytls.go", [("\tb.listeners[i].passthrough = true\n", "")], "TestGatewayTLSPassthrough$"),
 ("M29t9 TLSRoute status not written by the controller", "controllers/gateway/setup.go", [("GRPCRoutes: grpc, TLSRoutes: tlsr, BackendTLSPolicies: btls}", "GRPCRoutes: grpc, TLSRoutes: false, BackendTLSPolicies: btls}")], "TestGatewayTLSRouteStatus$", [], "./controllers/gateway/"),
 ("M29t10 HTTPS and TLS Passthrough on one port not in conflict", "proxy/gatewayapi/listeners.go", [("l.Protocol == gwv1.HTTPSProtocolType || passthroughListener(l)", "l.Protocol == gwv1.HTTPSProtocolType")], "TestPlanGateway$", [], "./controllers/gateway/"),
 ("M29t8 TLSRoute backendRef across namespaces without a grant", "proxy/gatewayapi/translate.go", [("\tcase ns != from.NamespacedName.Namespace && !Granted(", "\tcase ns != from.NamespacedName.Namespace && from.Kind != \"TLSRoute\" && !Granted(")], "TestTranslateGolden$", [], "./proxy/gatewayapi/"),
 ("M29f1 gateway client certs: a port with validation never asks for a certificate", "proxy/dataplane/gatewayclientcert.go", [("\tca := t.GatewayClientAuth(port)\n\tif ca == nil {\n\t\treturn nil, nil\n\t}", "\tca := t.GatewayClientAuth(port)\n\tif true {\n\t\treturn nil, nil\n\t}")], "TestGatewayClientCertificateValidation"),
 ("M29f2 gateway client certs: AllowValidOnly lets a certificate that does not verify through the handshake", "proxy/dataplane/gatewayclientcert.go", [("cs.PeerCertificates, time.Now()); res.Status != clientcert.Success {", "cs.PeerCertificates, time.Now()); false && res.Status != clientcert.Success {")], "TestGatewayClientCertificateValidation"),
 ("M29f3 gateway client certs: a resumed session is not verified (VerifyPeerCertificate's blind spot)", "proxy/dataplane/gatewayclientcert.go", [("cs.PeerCertificates, time.Now()); res.Status != clientcert.Success {", "cs.PeerCertificates, time.Now()); !cs.DidResume && res.Status != clientcert.Success {")], "TestGatewayClientCertificateValidation"),
 ("M29f4 gateway client certs: a request is not judged again (a connection outlives a CA rotation)", "proxy/dataplane/gatewayclientcert.go", [("ok = ca.InsecureFallback || res.Status == clientcert.Success", "ok = true")], "TestGatewayClientCertificateRotation"),
 ("M29f5 gateway client certs: a perPort entry does not override the default", "proxy/gatewayapi/frontend.go", [("\t\tif pp.Port == port {", "\t\tif false && pp.Port == port {")], "TestGatewayClientCertificateValidation"),
 ("M29f6 gateway client certs: AllowInsecureFallback is ignored", "proxy/gatewayapi/frontend.go", [("InsecureFallback: v.Mode == gatewayv1.AllowInsecureFallback}", "InsecureFallback: false}")], "TestGatewayClientCertificateValidation"),
 ("M29f7 gateway client certs: a listener without a usable CA still takes routes", "proxy/gatewayapi/frontend.go", [("\t\t\t\tb.accepted[i] = false\n", "")], "TestTranslateGolden", [], "./proxy/gatewayapi/"),
 ("M29f8 gateway client certs: a CA of another namespace without a ReferenceGrant", "proxy/gatewayapi/frontend.go", [("if obj.Namespace != namespace && !Granted(", "if false && !Granted(")], "TestTranslateGolden", [], "./proxy/gatewayapi/"),
 ("M29f9 gateway client certs: a port with no usable CA is served without validation", "proxy/gatewayapi/frontend.go", [("\t\tb.tb.SetGatewayClientAuth(int32(l.Port), ca)\n", "\t\tif ca.Refuse == \"\" {\n\t\t\tb.tb.SetGatewayClientAuth(int32(l.Port), ca)\n\t\t}\n")], "TestTranslateGolden", [], "./proxy/gatewayapi/"),
 ("M29f10 gateway client certs: InsecureFrontendValidationMode stays after the Gateway is back to AllowValidOnly", "controllers/gateway/frontend.go", [("\t\tmeta.RemoveStatusCondition(&st.Conditions, string(gwv1.GatewayConditionInsecureFrontendValidationMode))\n", "")], "TestFrontendStatus", [], "./controllers/gateway/"),
 ("M29f11 gateway client certs: a listener without a usable CA is reported programmed", "controllers/gateway/frontend.go", [("\t\tif p.NoValidCA {\n\t\t\tsetCondition(", "\t\tif false && p.NoValidCA {\n\t\t\tsetCondition(")], "TestFrontendStatus", [], "./controllers/gateway/"),
 ("M29f12 gateway client certs: a CA problem overwrites a certificateRef's verdict", "controllers/gateway/frontend.go", [("old.Status == metav1.ConditionFalse && old.Reason != c.Reason {", "false {")], "TestFrontendStatus", [], "./controllers/gateway/"),
 ("M29b1 BackendTLSPolicy SANs not checked", "proxy/dataplane/backendtls.go", [("return matchSANs(cs.PeerCertificates[0], sans)", "return nil")], "TestGatewayBackendTLSPolicy$"),
 ("M29b2 BackendTLSPolicy SANs do not replace the hostname", "proxy/dataplane/backendtls.go", [("\t\t\tname = \"\" // the chain is checked here, the names by matchSANs\n", "")], "TestGatewayBackendTLSPolicy$"),
 ("M29b3 BackendTLSPolicy TLS ID without the hostname", "proxy/table/policytls.go", [("bt.ID = backendTLSID(ns, &bt, caSource)", "bt.ID = backendTLSID(ns, &BackendTLS{SNI: bt.SNI, Verify: bt.Verify, Refuse: bt.Refuse}, caSource)")], "TestGatewayBackendTLSPolicyIdentity"),
 ("M29b4 BackendTLSPolicy CA ConfigMap of any namespace", "proxy/gatewayapi/backendtls.go", [("if c.Namespace == id.Namespace && c.Name == id.Name {", "if c.Name == id.Name {")], "TestGatewayBackendTLSPolicy$"),
 ("M29b5 BackendTLSPolicy conflict: the newest wins", "proxy/gatewayapi/backendtls.go", [("return a.CreationTimestamp.Before(&c.CreationTimestamp)", "return c.CreationTimestamp.Before(&a.CreationTimestamp)")], "TestGatewayBackendTLSPolicy$"),
 ("M29b6 BackendTLSPolicy TLS ID without the CA content", "proxy/gatewayapi/backendtls.go", [("sha256.Sum256([]byte(ca)))", "sha256.Sum256(nil))")], "TestBackendTLSPolicySettings", [], "./proxy/gatewayapi/"),
 ("M29b7 BackendTLSPolicy ancestor entry moved to the end on every write", "controllers/gateway/backendtls.go", [("\treturn slices.Insert(out, at, ours)", "\treturn append(out, ours)")], "TestMergePolicyAncestors", [], "./controllers/gateway/"),
 ("M29b8 Gateway client certificate Secret of another namespace read without a ReferenceGrant", "proxy/gatewayapi/backendtls.go", [('case name.Namespace != gw.Namespace && !Granted(grants, "Gateway", gw.Namespace, "Secret", name):', "case false:")], "TestGatewayBackendClientCertificate"),
 ("M29b9 Gateway client certificate not in the backend TLS ID", "proxy/gatewayapi/backendtls.go", [('bt.Certificate, source = cc.cert, source+",client="+cc.version', "bt.Certificate = cc.cert")], "TestBackendClientCertificateStatus", [], "./proxy/gatewayapi/"),
    # Chart (#25): these need HELM (make mutations sets it); the API server agreement test also KUBEBUILDER_ASSETS.
 ("M25c1 the proxy DaemonSet gets a Deployment's strategy field", "charts/metalgate/templates/proxy.yaml", [("  updateStrategy:\n    {{- toYaml . | nindent 4 }}", "  strategy:\n    {{- toYaml . | nindent 4 }}")], "TestChartProxyDaemonSet$", [], "./config/"),
 ("M25c2 a DaemonSet rollingUpdate with maxSurge and maxUnavailable both above 0 rendered", "charts/metalgate/templates/checks.yaml", [("{{- if and $unavailable $surge }}", "{{- if false }}")], "TestChartValuesRefused/DaemonSet_surging|TestChartProxyDaemonSetStrategies", [], "./config/"),
 ("M25c3 a DaemonSet's maxUnavailable read as 0 when unset (Kubernetes defaults it to 1)", "charts/metalgate/templates/checks.yaml", [('(dict "value" $r.maxUnavailable "default" 1)', '(dict "value" $r.maxUnavailable "default" 0)')], "TestChartValuesRefused/DaemonSet_surging|TestChartProxyDaemonSetStrategies", [], "./config/"),
 ("M25c4 a DaemonSet budget of maxUnavailable or a percentage rendered", "charts/metalgate/templates/checks.yaml", [('{{- if and .enabled (or (kindIs "invalid" .minAvailable) (kindIs "string" .minAvailable)) }}', "{{- if false }}")], "TestChartValuesRefused/DaemonSet_with", [], "./config/"),
 ("M25c5 a DaemonSet with autoscaling rendered", "charts/metalgate/templates/checks.yaml", [("{{- if .Values.proxy.autoscaling.enabled }}", "{{- if false }}")], "TestChartValuesRefused/DaemonSet_with_autoscaling", [], "./config/"),
 ("M25c6 a DaemonSet with a Deployment's strategy type rendered", "charts/metalgate/templates/checks.yaml", [('{{- if not (has $type (list "RollingUpdate" "OnDelete")) }}', "{{- if false }}")], "TestChartValuesRefused/DaemonSet_with_Recreate|TestChartProxyDaemonSetStrategies", [], "./config/"),
 ("M28h1 direct path: HTTP/2 requests go through ReverseProxy again", "proxy/dataplane/direct.go", [("(r.ProtoMajor == 1 || r.ProtoMajor == 2) &&", "r.ProtoMajor == 1 &&")], "TestTakesDirectPath"),
 ("M28h2 direct path: every protocol version takes it", "proxy/dataplane/direct.go", [("(r.ProtoMajor == 1 || r.ProtoMajor == 2) &&", "")], "TestTakesDirectPath"),
 ('M26m1 migrate calls cors-allow-origin one to one again (its * spans labels, unreadable entries allow nothing)', 'proxy/ingress/catalog.go', [(', "a leftmost * stands for one or more labels, where ingress-nginx\'s stood for exactly one (https://*.example.org allows https://a.b.example.org here, not there); an entry that is not an http(s) origin (null, another scheme, no scheme) allows no origin at all, where ingress-nginx skipped that entry"}', ', ""}')], 'TestMigrateNotOneToOne$', [], './cmd/kubectl-metalgate/'),
 ('M26m2 migrate calls the redirect codes one to one again (ingress-nginx took 300 to 308)', 'proxy/ingress/catalog.go', [(', "ingress-nginx used any code from 300 to 308; another than 301 or 308 is refused (InvalidAnnotation) and 301 used"}', ', ""}'), (', "ingress-nginx used any code from 300 to 307; another than 302, 303 or 307 is refused (InvalidAnnotation) and 302 used"}', ', ""}')], 'TestMigrateNotOneToOne$', [], './cmd/kubectl-metalgate/'),
 ('M26m3 migrate calls auth-method one to one again (PUT, DELETE… refused)', 'proxy/ingress/catalog.go', [(', "PUT, PATCH, DELETE, OPTIONS, CONNECT and TRACE, which ingress-nginx took, are refused (InvalidAnnotation) and GET used"}', ', ""}')], 'TestMigrateNotOneToOne$', [], './cmd/kubectl-metalgate/'),
 ('M26m4 migrate calls auth-tls-verify-depth one to one again (more than 10 refused)', 'proxy/ingress/catalog.go', [(', "ingress-nginx took any depth; more than 10 is refused (InvalidAnnotation) and 1 used"}', ', ""}')], 'TestMigrateNotOneToOne$', [], './cmd/kubectl-metalgate/'),
 ('M26m5 migrate calls load-balance one to one again (chash, sticky_* refused)', 'proxy/ingress/catalog.go', [(', "ingress-nginx\'s chash, chashsubset, sticky_balanced and sticky_persistent are refused (InvalidAnnotation) and round-robin used: use upstream-hash-by or affinity"}', ', ""}')], 'TestMigrateNotOneToOne$', [], './cmd/kubectl-metalgate/'),
 ("M26m6 migrate does not say basic auth's default realm differs", 'proxy/ingress/catalog.go', [('"digest is not supported; without auth-realm the realm is Authentication Required, where ingress-nginx\'s was empty"', '"digest is not supported"')], 'TestMigrateNotOneToOne$', [], './cmd/kubectl-metalgate/'),
 ("M26m7 migrate does not say the affinity cookie's default name differs", 'proxy/ingress/catalog.go', [("; without session-cookie-name the cookie is metalgate-affinity (ingress-nginx's: INGRESSCOOKIE), so sessions start anew after the move", '')], 'TestMigrateNotOneToOne$', [], './cmd/kubectl-metalgate/'),
 ("M26m8 migrate calls the ConfigMap's use-proxy-protocol one to one again (outside connections refused)", 'cmd/kubectl-metalgate/migrate_configmap.go', [('rep.add(changed, k, "\\"true\\": → --proxy-protocol-http=required', 'rep.add(same, k, "\\"true\\": → --proxy-protocol-http=required')], 'TestMigrateConfigMapKeys$', [], './cmd/kubectl-metalgate/'),
 ("M26m9 migrate reads proxy-real-ip-cidr apart from the proxy's list parser (white space does not separate)", 'cmd/kubectl-metalgate/migrate_configmap.go', [('prefixes, err := ingress.ParseAddressList(v)', 'prefixes, err := ingress.ParseAddressList(strings.ReplaceAll(v, " ", "#"))')], 'TestMigrateConfigMapListsAsTheProxyReads$', [], './cmd/kubectl-metalgate/'),
 ('M26m10 the shared address-list parser keeps host bits (both callers)', 'proxy/ingress/annotations.go', [('\t\tout = append(out, p.Masked())\n\t}\n\treturn out, nil', '\t\tout = append(out, p)\n\t}\n\treturn out, nil')], 'TestMigrateConfigMapListsAsTheProxyReads$', [], './cmd/kubectl-metalgate/'),
 ('M26m11 the shared size parser forgets g', 'proxy/ingress/annotations.go', [("\t\tcase 'g':\n\t\t\tmult, s = 1<<30, s[:n-1]\n", '')], 'TestListAndSizeParsers$', [], './proxy/ingress/'),
 ("M26m12 migrate's limit-burst-multiplier multiplies the rate a second for limit-rpm again", 'cmd/kubectl-metalgate/migrate_ingress.go', [('\treturn rpm, "a minute"\n', '\treturn rpm / 60, "a minute"\n')], 'TestMigrateRateLimitOnTheProxy|TestMigrateBurst', [], './cmd/kubectl-metalgate/'),
 ("M26m13 migrate leaves limit-rpm alone with the proxy's default burst", 'cmd/kubectl-metalgate/migrate_ingress.go', [('\trpmBurst(res.rep, ann, orig)\n', '')], 'TestMigrateRateLimitOnTheProxy', [], './cmd/kubectl-metalgate/'),
 ('M26m14 migrate calls limit-rpm beside limit-rps one to one (only limit-rps applies)', 'proxy/ingress/catalog.go', [('"429 with Retry-After; with limit-rps too only limit-rps applies, where ingress-nginx enforced both;', '"429 with Retry-After;')], 'TestMigrateNotOneToOne$', [], './cmd/kubectl-metalgate/'),
 ('M26m15 migrate calls the kept limit-burst-multiplier one to one (rate a second, not a minute)', 'proxy/ingress/catalog.go', [('"5", "with limit-rpm it multiplies the rate a second, ingress-nginx\'s the rate a minute (kubectl metalgate migrate writes limit-burst to keep ingress-nginx\'s)"}', '"5", ""}')], 'TestMigrateGolden$', [], './cmd/kubectl-metalgate/'),
 ("M25s-a Decide ignores the claims (plain rendezvous)", "speaker/decide.go", [("\t\t\tif _, bound := in.Claims[owner]; in.Claims != nil && (owner == me || bound) {\n", "\t\t\tif false {\n")], "TestDecideSticky|TestDecideDoubleClaim", [], "./speaker/"),
 ("M25s-b a speaker that sends no claims is bound by them (it takes the address anyway: two answer)", "speaker/decide.go", [("\t\t\tif _, bound := in.Claims[owner]; in.Claims != nil && (owner == me || bound) {\n", "\t\t\tif in.Claims != nil {\n")], "TestDecideSticky", [], "./speaker/"),
 ("M25s-l a speaker does not say in its metadata that it sends claims", "speaker/membership/membership.go", [("func (d delegate) NodeMeta(int) []byte { return claimsMeta }", "func (d delegate) NodeMeta(int) []byte { return nil }")], "TestClaimsDelegate", [], "./speaker/membership/"),
 ("M25s-c claims in this node's name accepted", "speaker/claims/claims.go", [("\tif m.Node == s.self {\n", "\tif false {\n")], "TestReceiveRefuses", [], "./speaker/claims/"),
 ("M25s-d claims of a non-member accepted", "speaker/claims/claims.go", [("\tif !s.member(m.Node) {\n", "\tif false {\n")], "TestReceiveRefuses", [], "./speaker/claims/"),
 ("M25s-e an older version accepted", "speaker/claims/claims.go", [("if ok && m.Version <= old.Version {", "if false {")], "TestReceiveRefuses", [], "./speaker/claims/"),
 ("M25s-f unsorted or duplicate addresses accepted", "speaker/claims/claims.go", [("\t\tcase i > 0 && vips[i-1].Compare(a) >= 0:\n", "\t\tcase false:\n")], "TestReceiveRefuses", [], "./speaker/claims/"),
 ("M25s-g no bound on the address count", "speaker/claims/claims.go", [("\tif count > MaxVIPs {\n", "\tif false {\n")], "TestReceiveRefuses", [], "./speaker/claims/"),
 ("M25s-h IPv4-mapped IPv6 accepted", "speaker/claims/claims.go", [("\t\tcase a.Is4In6():\n", "\t\tcase false:\n")], "TestReceiveRefuses", [], "./speaker/claims/"),
 ("M25s-i claims kept after the member left", "speaker/membership/membership.go", [("\tm.claims.Forget(name)\n", "")], "TestClaimsDelegate", [], "./speaker/membership/"),
 ("M25s-j a joining member is not sent our claims", "speaker/membership/membership.go", [("\te.m.sendClaims(n.Name) ", "\t_ = n.Name ")], "TestClaimsDelegate", [], "./speaker/membership/"),
 ("M25s-k the speaker never publishes its claims (real memberlists: addresses move on join)", "speaker/speaker.go", [("if err := s.opts.Claims.SetClaims(own); err != nil {", "if err := error(nil); err != nil {")], "TestStickyOwnership", [], "./speaker/"),
 ("M23f-a a refusal (queue full) answered at once", "proxy/dataplane/authslots.go", [("\ttimer := time.NewTimer(a.wait)\n\tselect {\n\tcase <-timer.C:\n\tcase <-ctx.Done():\n\t\ttimer.Stop()", "\ttimer := time.NewTimer(0)\n\tselect {\n\tcase <-timer.C:\n\tcase <-ctx.Done():\n\t\ttimer.Stop()")], "TestAuthSlotsRefusalHeld|TestBasicAuthRefusalHeld"),
 ("M23f-b a held refusal never forgotten", "proxy/dataplane/authslots.go", [("\ttn.holding--\n", "")], "TestAuthSlotsRefusalHeld|TestBasicAuthRefusalHeld"),
 ("M23f-c checks at the proxy's own priority", "proxy/dataplane/auth.go", [("\t\t_ = setThreadNice(c.nice)\n", "\t\t_ = c.nice\n")], "TestBasicAuthCheckNice$"),
 ("M23f-d a lowered thread handed back to other goroutines", "proxy/dataplane/auth.go", [("\t\truntime.LockOSThread() // never unlocked: the thread ends with this goroutine\n", "\t\truntime.LockOSThread()\n\t\tdefer runtime.UnlockOSThread()\n")], "TestBasicAuthCheckNice$"),
 ("M23f-e an unknown user's decoy hashed at the proxy's priority (its 401 is faster)", "proxy/dataplane/auth.go", [("\t\t_ = c.hash(ba.Decoy, pass)\n", "\t\t_ = c.compare(ba.Decoy, pass)\n")], "TestBasicAuthCheckNice$"),
 ("M23f-f a nice value out of range accepted", "proxy/dataplane/options.go", [("\tif o.AuthCheckNice < 0 || o.AuthCheckNice > 19 {\n", "\tif false {\n")], "TestBasicAuthCheckNiceInvalid"),
 ("M23f-g GOMAXPROCS not raised for lowered checks", "cmd/metalgate/proxy.go", [("\treturn procs + slots\n", "\treturn procs\n")], "TestAuthCheckProcs", [], "./cmd/metalgate/"),
 ("M23f-h default slots taken after GOMAXPROCS is raised", "cmd/metalgate/proxy.go", [("\t\td.AuthCheckSlots = dataplane.DefaultAuthCheckSlots() // before authCheckProcs raises GOMAXPROCS\n", "")], "TestAuthCheckProcs", [], "./cmd/metalgate/"),
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
