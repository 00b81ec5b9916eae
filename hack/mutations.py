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
 ("M8 no connection caps", "proxy/dataplane/server.go", [("ln = s.proxyProtocolListener(s.limitListener(ln, name), pp)", "ln = s.proxyProtocolListener(ln, pp)")], "TestMaxConnections"),
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
 ("M22a one namespace takes every auth slot", "proxy/dataplane/authslots.go", [("a.inUse < a.slots && tn.held < a.share && len(tn.waiting) == 0", "a.inUse < a.slots && len(tn.waiting) == 0"), ("len(tn.waiting) == 0 || tn.held >= a.share", "len(tn.waiting) == 0")], "TestAuthSlots$|TestBasicAuthFairness"),
 ("M22b auth slot wait unbounded", "proxy/dataplane/authslots.go", [("timer := time.NewTimer(a.wait)", "timer := time.NewTimer(time.Hour)")], "TestAuthSlotsWaitBounded|TestBasicAuthBusy/wait"),
 ("M22c auth queue unbounded", "proxy/dataplane/authslots.go", [("if len(tn.waiting) >= a.queue {", "if false {")], "TestAuthSlots$|TestBasicAuthBusy/queue"),
 ("M22d unknown users answered without hashing", "proxy/dataplane/auth.go", [("\t\t_ = c.compare(ba.Decoy, pass)\n", "")], "TestBasicAuthUnknownUserHashed"),
 ("M22e no bcrypt cost cap", "proxy/table/htpasswd.go", [("if cost > MaxBcryptCost {", "if false {")], "TestParseHtpasswd|TestBasicAuthSecrets", [], "./proxy/table/"),
 ("M22f one cache of checked passwords for every namespace", "proxy/dataplane/auth.go", [("c.ok[ns]", "c.ok[\"\"]")], "TestBasicAuthCachePerNamespace"),
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
