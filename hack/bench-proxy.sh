#!/usr/bin/env bash
# Proxy benchmark: metalgate's data plane against nginx, haproxy and Caddy as equivalent reverse
# proxies (upstream keep-alive, forwarding headers) in front of the same backend
# (e2e/cmd/echo), all on 127.0.0.1, one scenario after another:
#
#   h1         HTTP/1.1 keep-alive                       wrk -t$THREADS -c$CONNECTIONS
#   tls-ecdsa  HTTPS keep-alive, ECDSA P-256 certificate wrk (https), same
#   tls-rsa    HTTPS keep-alive, RSA-2048 certificate    wrk (https), same
#   h2         HTTP/2 over TLS (ALPN h2), ECDSA P-256    h2load -c$H2_CONNECTIONS -m$H2_STREAMS
#   new-ecdsa  a new TLS connection per request, ECDSA   ab -c$NEW_CONNECTIONS (HTTP/1.0)
#   new-rsa    a new TLS connection per request, RSA     ab, same
#
# Then the control-plane numbers: endpoint change → first request routed to the new endpoint
# through a real kube-apiserver (envtest), and the memory of a table of 10,000 Ingresses /
# 100,000 endpoints. Prints a table per scenario (every proxy's CPU per request, req/s and p99
# over nginx's), then the peer table (each scenario's CPU per request over nginx's, per proxy)
# and, as its last line:
#   RESULT proxy_rps_ratio_vs_nginx=<x> proxy_p99_ratio_vs_nginx=<x> endpoint_update_p99_ms=<n>
#     proxy_rss_mib_10k_ingresses=<n> proxy_cpu_per_req_ratio_vs_nginx=<x>
#     proxy_cpu_per_req_ratio_vs_nginx_tls=<x> proxy_cpu_per_req_ratio_vs_nginx_tls_rsa=<x>
#     proxy_cpu_per_req_ratio_vs_nginx_h2=<x> tls_handshakes_ratio_vs_nginx=<x>
#     tls_handshakes_ratio_vs_nginx_rsa=<x> proxy_cpu_per_req_ratio_vs_haproxy_h1=<x>
#     proxy_cpu_per_req_ratio_vs_haproxy_h2=<x> proxy_cpu_per_req_ratio_vs_caddy_h1=<x>
# (one line; a key is NA when its scenario or peer was not run). The unsuffixed _tls and
# handshake keys are ECDSA P-256, the _rsa ones RSA-2048; the _vs_haproxy and _vs_caddy keys
# are metalgate's CPU per request over that peer's, in h1 (HTTP/1.1 keep-alive) or h2.
#
# CPU per request is the efficiency figure: utime+stime of the proxy's processes (nginx: master
# and workers) from /proc/<pid>/stat, read before and after the measured run, divided by the
# requests the client completed in it. Unlike req/s it does not depend on whether the proxy or
# the load side (the client and the backend) is the bottleneck, nor much on other load on the
# machine. Like is compared with like: WORKERS sets nginx worker_processes, haproxy nbthread and
# metalgate's and Caddy's GOMAXPROCS to the same number, and all four are pinned to the same
# PROXY_CPUS. metalgate runs with --auth-check-nice=0: by default it adds its password-check
# slots to GOMAXPROCS (checks of a flooding namespace run on low-priority threads, docs/proxy.md
# "Sharing the proxy between namespaces"), which would give it more Ps than WORKERS; no
# scenario here checks a password.
#
# Caddy (v2.11.9, github.com/caddyserver/caddy/v2 with its standard modules, built from the Go
# module proxy by hack/caddy/build.sh into ./bin/caddy-<version> when missing; CADDY_BIN to use
# another) runs from a generated JSON config: a reverse_proxy to the same backend with upstream
# keep-alive (up to 256 idle connections, as nginx's keepalive), X-Forwarded-For/-Proto/-Host
# (its own) plus X-Real-IP and without its Via header; HTTP/1.1 only on the plain port; TLS by
# SNI from the same two certificate files, HTTP/2 by ALPN, no HTTP/3; automatic HTTPS, ACME and
# OCSP stapling off, no admin endpoint (admin disabled, config not persisted), no access log,
# logs at WARN. Traefik v3 (v3.7.13) was tried as a fifth peer and is absent: it does not build
# from the Go module proxy here. `go install .../cmd/traefik@v3.7.13` refuses a module with
# replace directives; from a module of our own, 14 of its dependencies (DNS-provider SDKs of its
# ACME client) are refused by the proxy (403), and two (github.com/abbot/go-http-auth and
# github.com/traefik/traefik/dynamic/ext) are required at placeholder versions that resolve only
# through Traefik's own replace directives, which a module depending on it does not inherit.
#
# TLS: TLS 1.3 on every side (all three clients offer it), X25519 and TLS_AES_128_GCM_SHA256
# (Go's server choice on AES hardware, so metalgate's and Caddy's; nginx and haproxy are told to
# prefer it too; Caddy's curves are nginx's list, its TLS 1.3 suites are Go's and cannot be
# configured), the certificate chosen by SNI: metalgate gets each certificate from a
# kubernetes.io/tls Secret named in the Ingress's spec.tls, nginx from a server block per host,
# haproxy from its crt list, Caddy from load_files (certmagic picks by SNI). The clients resolve the test hosts to 127.0.0.1 in a private mount namespace
# (unshare -m, a bind-mounted /etc/hosts), so the real SNI is sent. What each proxy negotiated
# and the certificate it served are printed at the start (openssl s_client).
#
# New connections: one new TLS connection per request, a full handshake each time. ab opens a
# fresh OpenSSL connection per request and never offers a session to resume; wrk and h2load
# re-use their OpenSSL object on reconnect and resume with the TLS 1.3 ticket that Go's server
# (metalgate's included) issues by default, which nginx, haproxy and Caddy here do not (tickets
# and session cache off; Caddy: session_tickets disabled), so they would compare a PSK resumption
# with full handshakes. The TLS check at the start also offers each proxy the session it issued
# (openssl s_client -sess_out, then -sess_in) and prints whether it resumed; nginx, haproxy and
# Caddy must not. The script
# checks that ab does not resume before it runs the scenario (hack/benchresume: a Go TLS server
# with Go's defaults that counts resumed handshakes). Metalgate still issues a ticket per
# handshake (Go's default, not configurable from the proxy's flags); that cost is in its figure.
# The handshake ratio is nginx's CPU per new connection over metalgate's: the new connections
# per second each would sustain on its pinned core(s). When the load side saturates first (ab is
# single-threaded and verifies the server's signature itself), measured conn/s converge; the
# table shows both.
#
# Usage: hack/bench-proxy.sh   Environment (defaults): DURATION=10s (seconds) CONNECTIONS=64
#   THREADS=2 (wrk and h2load threads) WORKERS=1 (nginx worker_processes = haproxy nbthread =
#   metalgate and Caddy GOMAXPROCS) PROXY_CPUS=1 LOAD_CPUS=0 (taskset lists: proxies on one set, the
#   clients and the backend on the other; empty disables pinning) ROUNDS=1 (each proxy measured
#   ROUNDS times per scenario, interleaved; the best round counts)
#   SCENARIOS="h1 tls-ecdsa tls-rsa h2 new-ecdsa new-rsa" PROXIES="metalgate nginx haproxy caddy"
#   H2_CONNECTIONS=64 H2_STREAMS=10 NEW_CONNECTIONS=32 (ab concurrency)
#   PROFILE= (1: after the measurements, a perf CPU profile of metalgate and nginx in each
#   scenario, summarised: where the CPU goes) PROFILE_DIR= (keep perf.data and binaries)
#   SKIP_CONTROLPLANE= (set: no envtest and 10k-table measurements)
#   METALGATE_BIN, ECHO_BIN (prebuilt binaries; default: built from this tree) CADDY_BIN
#   (default: ./bin/caddy-<version of hack/caddy/go.mod>, built when missing)
#   KUBEBUILDER_ASSETS (default ./bin/k8s-v1.35.4).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-1}
PROXY_CPUS=${PROXY_CPUS-1}
LOAD_CPUS=${LOAD_CPUS-0}
ROUNDS=${ROUNDS:-1}
SCENARIOS=${SCENARIOS:-h1 tls-ecdsa tls-rsa h2 new-ecdsa new-rsa}
PROXIES=${PROXIES:-metalgate nginx haproxy caddy}
H2_CONNECTIONS=${H2_CONNECTIONS:-64}
H2_STREAMS=${H2_STREAMS:-10}
NEW_CONNECTIONS=${NEW_CONNECTIONS:-32}
PROFILE=${PROFILE:-}
PROFILE_DIR=${PROFILE_DIR:-}
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$ROOT/bin/k8s-v1.35.4}

BACKEND_PORT=18080 METALGATE_PORT=18081 NGINX_PORT=18082 HAPROXY_PORT=18083 ADMIN_PORT=18091
METALGATE_TLS_PORT=18443 NGINX_TLS_PORT=18444 HAPROXY_TLS_PORT=18445 PROBE_PORT=18446
CADDY_PORT=18084 CADDY_TLS_PORT=18447
HOST_ECDSA=ecdsa.bench.metalgate.test HOST_RSA=rsa.bench.metalgate.test
# TLS 1.3 suites in Go's server order on AES hardware; nginx and haproxy prefer them in this order
# (metalgate and Caddy are Go: this order is theirs).
SUITES=TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256

has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; } # has LIST WORD
tls_scenarios=false
for s in $SCENARIOS; do
	case $s in
	h1) ;;
	tls-ecdsa | tls-rsa | h2 | new-ecdsa | new-rsa) tls_scenarios=true ;;
	*) echo "unknown scenario $s (h1 tls-ecdsa tls-rsa h2 new-ecdsa new-rsa)" >&2; exit 2 ;;
	esac
done
for n in $PROXIES; do
	case $n in
	metalgate | nginx | haproxy | caddy) ;;
	*) echo "unknown proxy $n (metalgate nginx haproxy caddy)" >&2; exit 2 ;;
	esac
done
has "$PROXIES" nginx || { echo "PROXIES must include nginx (the reference)" >&2; exit 2; }

# --- tools (idempotent) ----------------------------------------------------------------------
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
if $tls_scenarios; then
	command -v openssl >/dev/null || missing+=(openssl)
	command -v h2load >/dev/null || missing+=(nghttp2-client)
	command -v ab >/dev/null || missing+=(apache2-utils)
fi
if [ -n "$PROFILE" ]; then command -v perf >/dev/null || missing+=(linux-perf); fi
if [ ${#missing[@]} -gt 0 ]; then
	echo ">> installing ${missing[*]}"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
CADDY=
if has "$PROXIES" caddy; then
	# Caddy from its own module (hack/caddy), cached in ./bin: built only when missing.
	CADDY=${CADDY_BIN:-}
	if [ -z "$CADDY" ]; then
		CADDY=$(hack/caddy/build.sh "$ROOT/bin" | tail -1) ||
			{ echo "!! building Caddy failed (see above); PROXIES without caddy runs the others" >&2; exit 1; }
	fi
	[ -x "$CADDY" ] || { echo "no Caddy binary at '$CADDY'" >&2; exit 1; }
	echo ">> caddy: $CADDY ($("$CADDY" version | awk '{print $1}'))"
fi

pin() { # pin CPUS command...: run pinned when CPUS is set
	local cpus=$1; shift
	if [ -n "$cpus" ]; then taskset -c "$cpus" "$@"; else "$@"; fi
}
spawn() { # spawn CPUS command...: start in the background, pinned; its pid in $! is the command's
	local cpus=$1; shift
	if [ -n "$cpus" ]; then (exec taskset -c "$cpus" "$@") & else (exec "$@") & fi
}

tmp=$(mktemp -d /tmp/bench-proxy.XXXXXX)
chmod 755 "$tmp"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

client() { # client command...: a load generator on LOAD_CPUS that resolves the test hosts to 127.0.0.1
	pin "$LOAD_CPUS" unshare -m sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$tmp/hosts" "$@"
}

if [ -n "${METALGATE_BIN:-}" ]; then
	cp "$METALGATE_BIN" "$tmp/metalgate"
else
	echo ">> building metalgate"
	CGO_ENABLED=0 go build -trimpath -o "$tmp/metalgate" ./cmd/metalgate
fi
if [ -n "${ECHO_BIN:-}" ]; then
	cp "$ECHO_BIN" "$tmp/echo"
else
	echo ">> building the echo backend"
	CGO_ENABLED=0 go build -trimpath -o "$tmp/echo" ./e2e/cmd/echo
fi

wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "nothing listening on port $1" >&2
	return 1
}

for port in $BACKEND_PORT $METALGATE_PORT $NGINX_PORT $HAPROXY_PORT $ADMIN_PORT \
	$METALGATE_TLS_PORT $NGINX_TLS_PORT $HAPROXY_TLS_PORT $PROBE_PORT $CADDY_PORT $CADDY_TLS_PORT; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "port $port is already in use (a previous run still going?); stop it first" >&2
		exit 1
	fi
done

# --- certificates: self-signed, one per key type, for the test hosts ---------------------------
mkdir -p "$tmp/certs"
echo "127.0.0.1 localhost $HOST_ECDSA $HOST_RSA" >"$tmp/hosts"
gencert() { # name host openssl-newkey-args...
	local name=$1 host=$2; shift 2
	openssl req -x509 "$@" -nodes -days 7 -subj "/CN=$host" -addext "subjectAltName=DNS:$host" \
		-keyout "$tmp/certs/$name.key" -out "$tmp/certs/$name.crt" 2>/dev/null
	cat "$tmp/certs/$name.crt" "$tmp/certs/$name.key" >"$tmp/certs/$name.pem" # haproxy's format
}
gencert ecdsa $HOST_ECDSA -newkey ec -pkeyopt ec_paramgen_curve:prime256v1
gencert rsa $HOST_RSA -newkey rsa:2048

# --- backend ---------------------------------------------------------------------------------
spawn "$LOAD_CPUS" "$tmp/echo" -listen "127.0.0.1:$BACKEND_PORT" >"$tmp/echo.log" 2>&1
pids+=($!)
wait_port $BACKEND_PORT

# --- metalgate (static table: same objects the control plane would read) ---------------------
b64() { base64 -w0 <"$1"; }
cat >"$tmp/static.yaml" <<YAML
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: metalgate}
spec: {controller: metalgate.io/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: bench, namespace: default}
spec:
  ingressClassName: metalgate
  rules:
  - http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: bench-tls, namespace: default}
spec:
  ingressClassName: metalgate
  tls:
  - {hosts: [$HOST_ECDSA], secretName: bench-ecdsa}
  - {hosts: [$HOST_RSA], secretName: bench-rsa}
  rules:
  - host: $HOST_ECDSA
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}
  - host: $HOST_RSA
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}
---
apiVersion: v1
kind: Secret
metadata: {name: bench-ecdsa, namespace: default}
type: kubernetes.io/tls
data: {tls.crt: $(b64 "$tmp/certs/ecdsa.crt"), tls.key: $(b64 "$tmp/certs/ecdsa.key")}
---
apiVersion: v1
kind: Secret
metadata: {name: bench-rsa, namespace: default}
type: kubernetes.io/tls
data: {tls.crt: $(b64 "$tmp/certs/rsa.crt"), tls.key: $(b64 "$tmp/certs/rsa.key")}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: default}
spec: {ports: [{name: http, port: 80, protocol: TCP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-1, namespace: default, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: http, port: $BACKEND_PORT, protocol: TCP}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
YAML
declare -A PID PORT TLS_PORT
if has "$PROXIES" metalgate; then
	GOMAXPROCS=$WORKERS spawn "$PROXY_CPUS" "$tmp/metalgate" proxy --static-config "$tmp/static.yaml" \
		--http-bind-address "127.0.0.1:$METALGATE_PORT" --https-bind-address "127.0.0.1:$METALGATE_TLS_PORT" \
		--admin-bind-address "127.0.0.1:$ADMIN_PORT" --auth-check-nice=0 >"$tmp/metalgate.log" 2>&1
	PID[metalgate]=$! PORT[metalgate]=$METALGATE_PORT TLS_PORT[metalgate]=$METALGATE_TLS_PORT
	pids+=($!)
fi

# --- nginx -----------------------------------------------------------------------------------
mkdir -p "$tmp/nginx"
location="location / {
      proxy_pass http://echo;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_set_header Host \$host;
      proxy_set_header X-Forwarded-For \$remote_addr;
      proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_set_header X-Real-IP \$remote_addr;
    }"
tls_server() { # name host: an HTTPS (and h2) server block for host with certificate name
	cat <<CONF
  server {
    listen 127.0.0.1:$NGINX_TLS_PORT ssl http2;
    server_name $2;
    ssl_certificate $tmp/certs/$1.crt;
    ssl_certificate_key $tmp/certs/$1.key;
    keepalive_requests 1000000;
    $location
  }
CONF
}
cat >"$tmp/nginx/nginx.conf" <<CONF
user root;
daemon off;
worker_processes $WORKERS;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  upstream echo { server 127.0.0.1:$BACKEND_PORT; keepalive 256; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    keepalive_requests 1000000;
    $location
  }
  # TLS as metalgate's: 1.2 and 1.3, X25519 first, AES-128-GCM first; no resumption (no
  # tickets, no session cache), so that every new connection is a full handshake.
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_prefer_server_ciphers on;
  ssl_conf_command Ciphersuites $SUITES;
  ssl_ecdh_curve X25519:prime256v1:secp384r1;
  ssl_session_tickets off;
  ssl_session_cache off;
$(tls_server ecdsa $HOST_ECDSA)
$(tls_server rsa $HOST_RSA)
}
CONF
spawn "$PROXY_CPUS" "$NGINX" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" >"$tmp/nginx/stdout" 2>&1
PID[nginx]=$! PORT[nginx]=$NGINX_PORT TLS_PORT[nginx]=$NGINX_TLS_PORT
pids+=($!)

# --- haproxy ---------------------------------------------------------------------------------
cat >"$tmp/haproxy.cfg" <<CONF
global
  nbthread $WORKERS
  maxconn 4096
  # TLS as metalgate's and nginx's; no resumption (no tickets, no session cache).
  tune.ssl.cachesize 0
  ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets
  ssl-default-bind-ciphersuites $SUITES
  ssl-default-bind-curves X25519:P-256:P-384
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  option http-keep-alive
  option forwardfor
  http-reuse always
frontend fe
  bind 127.0.0.1:$HAPROXY_PORT
  default_backend be
frontend fe_tls
  bind 127.0.0.1:$HAPROXY_TLS_PORT ssl crt $tmp/certs/ecdsa.pem crt $tmp/certs/rsa.pem alpn h2,http/1.1
  http-request set-header X-Forwarded-Proto https
  http-request set-header X-Real-IP %[src]
  default_backend be
backend be
  server echo 127.0.0.1:$BACKEND_PORT maxconn 2000
CONF
if has "$PROXIES" haproxy; then
	spawn "$PROXY_CPUS" "$HAPROXY" -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1
	PID[haproxy]=$! PORT[haproxy]=$HAPROXY_PORT TLS_PORT[haproxy]=$HAPROXY_TLS_PORT
	pids+=($!)
fi

# --- caddy: a generated JSON config (the Caddyfile adapter would add automatic HTTPS) ------------
# admin disabled and the config not persisted: no admin endpoint, nothing written outside $tmp
# (HOME and the XDG directories point into it too). Session tickets off, as nginx's and haproxy's.
caddy_route='{"handle": [{"handler": "reverse_proxy",
      "upstreams": [{"dial": "127.0.0.1:'$BACKEND_PORT'"}],
      "transport": {"protocol": "http", "keep_alive": {"enabled": true, "max_idle_conns_per_host": 256}},
      "headers": {"request": {"set": {"X-Real-IP": ["{http.request.remote.host}"]}, "delete": ["Via"]}}}]}'
cat >"$tmp/caddy.json" <<JSON
{
  "admin": {"disabled": true, "config": {"persist": false}},
  "logging": {"logs": {"default": {"level": "WARN"}}},
  "apps": {
    "http": {
      "servers": {
        "plain": {
          "listen": ["127.0.0.1:$CADDY_PORT"],
          "protocols": ["h1"],
          "automatic_https": {"disable": true},
          "routes": [$caddy_route]
        },
        "tls": {
          "listen": ["127.0.0.1:$CADDY_TLS_PORT"],
          "protocols": ["h1", "h2"],
          "automatic_https": {"disable": true},
          "tls_connection_policies": [{"protocol_min": "tls1.2", "curves": ["x25519", "secp256r1", "secp384r1"]}],
          "routes": [$caddy_route]
        }
      }
    },
    "tls": {
      "certificates": {"load_files": [
        {"certificate": "$tmp/certs/ecdsa.crt", "key": "$tmp/certs/ecdsa.key", "tags": ["ecdsa"]},
        {"certificate": "$tmp/certs/rsa.crt", "key": "$tmp/certs/rsa.key", "tags": ["rsa"]}
      ]},
      "session_tickets": {"disabled": true},
      "disable_ocsp_stapling": true
    }
  }
}
JSON
if has "$PROXIES" caddy; then
	mkdir -p "$tmp/caddy"
	HOME=$tmp/caddy XDG_CONFIG_HOME=$tmp/caddy XDG_DATA_HOME=$tmp/caddy GOMAXPROCS=$WORKERS \
		spawn "$PROXY_CPUS" "$CADDY" run --config "$tmp/caddy.json" >"$tmp/caddy.log" 2>&1
	PID[caddy]=$! PORT[caddy]=$CADDY_PORT TLS_PORT[caddy]=$CADDY_TLS_PORT
	pids+=($!)
fi

for n in $PROXIES; do
	wait_port "${PORT[$n]}"
	wait_port "${TLS_PORT[$n]}"
done

# --- TLS: what each proxy negotiates, and that it serves our certificate by SNI -----------------
if $tls_scenarios; then
	echo ">> TLS as negotiated with OpenSSL's client (openssl s_client -alpn h2,http/1.1)"
	for n in $PROXIES; do
		for c in ecdsa rsa; do
			host=HOST_${c^^}
			out=$(openssl s_client -connect "127.0.0.1:${TLS_PORT[$n]}" -servername "${!host}" -alpn h2,http/1.1 </dev/null 2>&1 | tr -d '\0' || true)
			got=$(echo "$out" | openssl x509 -noout -fingerprint -sha256 2>/dev/null || true)
			want=$(openssl x509 -noout -fingerprint -sha256 -in "$tmp/certs/$c.crt")
			if [ "$got" != "$want" ]; then
				echo "!! $n does not serve the $c certificate for ${!host}:" >&2
				echo "$out" | head -30 >&2
				exit 1
			fi
			printf '   %-10s %-6s %s\n' "$n" "$c" "$(echo "$out" | awk '
				/^New, / { proto = $2; sub(/,$/, "", proto); cipher = $NF }
				/^Peer signature type:/ { sig = $4 }
				/^Server Temp Key:/ { group = $4; sub(/,$/, "", group) }
				/^ALPN protocol:/ { alpn = $3 }
				END { printf "%s %s, key exchange %s, signature %s, ALPN %s", proto, cipher, group, sig, alpn }')"
		done
	done
	# Resumption: a request on a first connection (its session and any ticket saved), then the
	# session offered on a second one. nginx, haproxy and Caddy have tickets off: a proxy that
	# resumed here would give wrk and h2load cheap reconnections the others do not. The first
	# request's answer (the echo backend's JSON) also shows the forwarding headers it received.
	echo ">> TLS session resumption offered to each proxy (openssl s_client -sess_out, then -sess_in); forwarding headers the backend got"
	for n in $PROXIES; do
		sess=$tmp/session-$n.pem
		rm -f "$sess"
		out=$(printf 'GET / HTTP/1.0\r\nHost: %s\r\n\r\n' "$HOST_ECDSA" | openssl s_client -connect "127.0.0.1:${TLS_PORT[$n]}" \
			-servername "$HOST_ECDSA" -sess_out "$sess" -ign_eof 2>/dev/null | tr -d '\0' || true)
		fwd=$(echo "$out" | grep -o -E '"(X-[A-Za-z-]+|Forwarded|Via)":' | tr -d '":' | sort | paste -sd' ')
		resumed=no
		if [ -s "$sess" ] && printf 'GET / HTTP/1.0\r\nHost: %s\r\n\r\n' "$HOST_ECDSA" | openssl s_client \
			-connect "127.0.0.1:${TLS_PORT[$n]}" -servername "$HOST_ECDSA" -sess_in "$sess" -ign_eof 2>/dev/null | grep -q '^Reused,'; then
			resumed=yes
		fi
		printf '   %-10s resumed: %-3s  backend got: %s\n' "$n" "$resumed" "${fwd:-(none)}"
		if [ "$resumed" = yes ] && [ "$n" != metalgate ]; then
			echo "!! $n resumed a TLS session: its tickets should be off, as nginx's and haproxy's" >&2
			exit 1
		fi
	done
fi

# --- the new-connections client must not resume sessions ------------------------------------
if has "$SCENARIOS" new-ecdsa || has "$SCENARIOS" new-rsa; then
	echo ">> checking that ab makes a full handshake per connection (hack/benchresume, Go's TLS defaults)"
	go build -o "$tmp/benchresume" ./hack/benchresume
	spawn "$PROXY_CPUS" "$tmp/benchresume" -listen "127.0.0.1:$PROBE_PORT" \
		-cert "$tmp/certs/ecdsa.crt" -key "$tmp/certs/ecdsa.key" >"$tmp/benchresume.out" 2>"$tmp/benchresume.log"
	probe_pid=$!
	pids+=($probe_pid)
	wait_port $PROBE_PORT
	client ab -q -r -l -c 4 -t 1 -n 1000000 "https://$HOST_ECDSA:$PROBE_PORT/" >/dev/null 2>&1 || true
	kill -TERM $probe_pid
	wait $probe_pid || true
	counts=$(cat "$tmp/benchresume.out")
	echo "   ab against a Go TLS server: $counts"
	full=$(echo "$counts" | sed -n 's/.*full=\([0-9]*\).*/\1/p')
	resumed=$(echo "$counts" | sed -n 's/.*resumed=\([0-9]*\).*/\1/p')
	if [ "${full:-0}" -lt 10 ] || [ "${resumed:-1}" -ne 0 ]; then
		echo "!! ab resumed TLS sessions (or made too few connections): the new-connections figures would not be full handshakes" >&2
		exit 1
	fi
fi

# --- measurement helpers ---------------------------------------------------------------------
tree() { echo "$1"; pgrep -P "$1" || true; } # a process and its children (nginx workers)
cpu_ticks() { # utime+stime of a process tree, in clock ticks
	local sum=0 p
	for p in $(tree "$1"); do
		[ -r "/proc/$p/stat" ] || continue
		# fields after the ")" of the command name: utime is the 12th, stime the 13th
		set -- $(sed 's/.*) //' "/proc/$p/stat")
		sum=$((sum + ${12} + ${13}))
	done
	echo $sum
}
hwm_kib() { # peak RSS of a process tree, summed over its processes
	local sum=0 p v
	for p in $(tree "$1"); do
		v=$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
		sum=$((sum + ${v:-0}))
	done
	echo $sum
}
to_ms() { # wrk latency (12.3us, 1.2ms, 1.1s) to milliseconds
	awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'
}
TCK=$(getconf CLK_TCK)
SECS=${DURATION%s}

load() { # scenario port duration: run the scenario's client against port for duration
	local sc=$1 port=$2 d=$3
	case $sc in
	h1) pin "$LOAD_CPUS" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$d" --latency "http://127.0.0.1:$port/" ;;
	tls-ecdsa) client wrk -t"$THREADS" -c"$CONNECTIONS" -d"$d" --latency "https://$HOST_ECDSA:$port/" ;;
	tls-rsa) client wrk -t"$THREADS" -c"$CONNECTIONS" -d"$d" --latency "https://$HOST_RSA:$port/" ;;
	h2)
		rm -f "$tmp/h2load.log"
		client h2load -t"$THREADS" -c"$H2_CONNECTIONS" -m"$H2_STREAMS" -D"${d%s}" --log-file="$tmp/h2load.log" "https://$HOST_ECDSA:$port/"
		;;
	new-ecdsa | new-rsa)
		local host=HOST_${sc#new-}
		host=${host^^}
		rm -f "$tmp/ab.csv"
		# -l: the echo's body length varies; -r: a reset is counted, not fatal
		client ab -q -r -l -c "$NEW_CONNECTIONS" -t "${d%s}" -n 2000000 -e "$tmp/ab.csv" "https://${!host}:$port/" 2>&1
		;;
	esac
}
client_cmd() { # scenario: the client's command line, for the table's title
	case $1 in
	h1 | tls-*) echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency (keep-alive)" ;;
	h2) echo "h2load -t$THREADS -c$H2_CONNECTIONS -m$H2_STREAMS -D${SECS} (ALPN h2)" ;;
	new-*) echo "ab -c$NEW_CONNECTIONS -t$SECS (HTTP/1.0: a new TLS connection per request, no resumption)" ;;
	esac
}
title() {
	case $1 in
	h1) echo "HTTP/1.1 keep-alive" ;;
	tls-ecdsa) echo "HTTPS keep-alive, ECDSA P-256" ;;
	tls-rsa) echo "HTTPS keep-alive, RSA-2048" ;;
	h2) echo "HTTP/2 over TLS, ECDSA P-256" ;;
	new-ecdsa) echo "new TLS connections (full handshake per request), ECDSA P-256" ;;
	new-rsa) echo "new TLS connections (full handshake per request), RSA-2048" ;;
	esac
}
# parse scenario output: "reqs rps p50_ms p99_ms errors" of one client run
parse() {
	local sc=$1 out=$2
	case $sc in
	h1 | tls-*)
		local errs=0
		if echo "$out" | grep -q "Non-2xx"; then errs=$(echo "$out" | awk '/Non-2xx/ {print $NF}'); fi
		if echo "$out" | grep -q "Socket errors"; then errs="$errs+sock"; fi
		echo "$(echo "$out" | awk '/ requests in / {print $1}') $(echo "$out" | awk '/^Requests\/sec:/ {print $2}')" \
			"$(to_ms "$(echo "$out" | awk '$1 == "50%" {print $2}')") $(to_ms "$(echo "$out" | awk '$1 == "99%" {print $2}')") $errs"
		;;
	h2)
		# requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout
		# status codes: N 2xx, N 3xx, N 4xx, N 5xx
		local done errs rps p50 p99
		done=$(echo "$out" | awk '/^requests:/ {print $6}')
		errs=$(echo "$out" | awk '/^requests:/ { e = $10 + $12 + $14 } /^status codes:/ { e += $5 + $7 + $9 } END { print e + 0 }')
		rps=$(echo "$out" | awk '/^finished in/ {print $4}')
		# --log-file: start time (µs since the epoch), status, µs until the end of the response
		read -r p50 p99 < <(awk -F'\t' '{print $3}' "$tmp/h2load.log" | sort -n | awk '
			function at(q,  i) { i = int(NR * q); return v[i < 1 ? 1 : i] / 1000 }
			{ v[NR] = $1 } END { if (NR == 0) print "NA NA"; else printf "%.3f %.3f\n", at(0.50), at(0.99) }')
		echo "$done $rps $p50 $p99 $errs"
		;;
	new-*)
		local done failed non2xx
		done=$(echo "$out" | awk '/^Complete requests:/ {print $3}')
		failed=$(echo "$out" | awk '/^Failed requests:/ {print $3}')
		non2xx=$(echo "$out" | awk '/^Non-2xx responses:/ {print $3}')
		echo "$done $(echo "$out" | awk '/^Requests per second:/ {print $4}')" \
			"$(awk -F, '$1 == 50 {printf "%.3f", $2}' "$tmp/ab.csv") $(awk -F, '$1 == 99 {printf "%.3f", $2}' "$tmp/ab.csv")" \
			"$((failed + ${non2xx:-0}))"
		;;
	esac
}

declare -A RPS P50 P99 CPU RSS USREQ ERRS
run_one() { # scenario name
	local sc=$1 name=$2 pid=${PID[$2]} port out t0 t1 reqs rps p50 p99 errs usreq k="$1/$2"
	port=${PORT[$name]}
	[ "$sc" = h1 ] || port=${TLS_PORT[$name]}
	load "$sc" "$port" 2s >/dev/null # warm up
	t0=$(cpu_ticks "$pid")
	out=$(load "$sc" "$port" "$DURATION")
	t1=$(cpu_ticks "$pid")
	echo "$out" | { grep -v -E '^(progress|spawning thread|starting benchmark)' || true; } | sed "s/^/   [$sc $name] /"
	read -r reqs rps p50 p99 errs < <(parse "$sc" "$out")
	if [ -z "$reqs" ] || [ "$reqs" = 0 ]; then
		echo "!! $sc $name: no requests completed" >&2
		exit 1
	fi
	[ "$errs" = 0 ] || echo "!! $sc $name: $errs failed or non-2xx responses" >&2
	# CPU µs per request over this run: ticks → µs, over the requests the client completed.
	usreq=$(awk -v d=$((t1 - t0)) -v t="$TCK" -v n="$reqs" 'BEGIN { printf "%.1f", d / t * 1e6 / n }')
	echo "   [$sc $name] CPU $((t1 - t0)) ticks for $reqs requests: $usreq µs/req"
	if [ -z "${RPS[$k]:-}" ] || awk -v a="$rps" -v b="${RPS[$k]}" 'BEGIN { exit !(a > b) }'; then
		RPS[$k]=$rps P50[$k]=$p50 P99[$k]=$p99 ERRS[$k]=$errs
		CPU[$k]=$(awk -v d=$((t1 - t0)) -v t="$TCK" -v s="$SECS" 'BEGIN { printf "%.0f", 100 * d / t / s }')
	fi
	# The lowest CPU per request over the rounds counts (interference only ever adds CPU).
	if [ -z "${USREQ[$k]:-}" ] || awk -v a="$usreq" -v b="${USREQ[$k]}" 'BEGIN { exit !(a < b) }'; then
		USREQ[$k]=$usreq
	fi
	RSS[$k]=$(awk -v k="$(hwm_kib "$pid")" 'BEGIN { printf "%.1f", k / 1024 }')
}

echo ">> proxies pinned to CPUs '${PROXY_CPUS:-any}' with $WORKERS worker(s), clients and backend to '${LOAD_CPUS:-any}'; $ROUNDS round(s) per scenario"
for sc in $SCENARIOS; do
	echo ">> $sc: $(title "$sc"): $(client_cmd "$sc")"
	for round in $(seq "$ROUNDS"); do
		for n in $PROXIES; do run_one "$sc" "$n"; done
	done
done

# --- profiles (PROFILE=1) --------------------------------------------------------------------
# perf samples the proxy's CPU (cpu-clock, frame-pointer stacks: Go keeps frame pointers) during
# one more run of each scenario; the summary groups the samples by where the CPU was spent.
profile_go() { # perf.data pids: self time of a Go process by package group, key call paths, top functions
	local data=$1 pids=$2
	perf script -i "$data" --pid "$pids" -F ip,sym,dso 2>/dev/null | awk '
		function cat(sym, dso) {
			if (dso ~ /kernel/) return "kernel (syscalls, TCP/IP)"
			if (sym ~ /^crypto\/tls\./) return "crypto/tls (handshake, record layer)"
			if (sym ~ /^(crypto\/|vendor\/golang\.org\/x\/crypto|golang\.org\/x\/crypto|math\/big|p256)/) return "crypto primitives"
			if (sym ~ /http2/) return "net/http HTTP/2"
			if (sym ~ /^net\/http/) return "net/http HTTP/1"
			if (sym ~ /^github\.com\/metalgate\//) return "metalgate"
			if (sym ~ /^runtime\.(mallocgc|gc|scanobject|markroot|greyobject|findObject|heapBits|sweep|mspan|mcache|mcentral|mheap|wbBuf|bulkBarrier|typePointers|scanblock|memclr|nextFreeFast|newobject|makeslice|growslice|makemap)/ || sym ~ /^runtime\.\(\*(mspan|mcache|mcentral|mheap|gcWork|gcControllerState|sweepLocked|mSpanStateBox)\)/) return "runtime: allocation, GC"
			if (sym ~ /^runtime\.mem(move|equal)/) return "runtime: memmove"
			if (sym ~ /^runtime\./ || sym ~ /^internal\/runtime/) return "runtime: scheduler, netpoll, other"
			if (sym ~ /^(syscall|internal\/poll|internal\/syscall|net\.)/) return "syscall, net, poll (Go side)"
			return "other Go"
		}
		function flush(  i, j) {
			if (n == 0) return
			total++; self[cat(leafsym, leafdso)]++
			for (j = 1; j <= np; j++)
				for (i = 1; i <= n; i++)
					if (frame[i] ~ re[j]) { incl[j]++; break }
			n = 0
		}
		function pat(name, regex) { np++; label[np] = name; re[np] = regex }
		BEGIN {
			pat("TLS handshake (crypto/tls.(*Conn).handshakeContext)", "^crypto/tls\\.\\(\\*Conn\\)\\.handshakeContext")
			pat("  Certificate and CertificateVerify (sendServerCertificate)", "sendServerCertificate")
			pat("    signature (ECDSA or RSA-PSS sign)", "^crypto/(ecdsa|rsa|internal/fips140/(ecdsa|rsa))\\.(Sign|sign|signPSS|SignPSS|signECDSA|decrypt)")
			pat("  key exchange (X25519, ML-KEM, ECDH)", "^crypto/(ecdh|internal/fips140/(ecdh|edwards25519|mlkem)|mlkem)")
			pat("  session ticket (sendSessionTickets)", "sendSessionTickets")
			pat("TLS record read (crypto/tls.(*Conn).Read)", "^crypto/tls\\.\\(\\*Conn\\)\\.Read$")
			pat("TLS record write (crypto/tls.(*Conn).Write)", "^crypto/tls\\.\\(\\*Conn\\)\\.Write$")
			pat("AES-GCM (seal, open)", "[Gg][Cc][Mm]")
			pat("HTTP/2 server connection (http2serverConn)", "http2.*serverConn")
			pat("net/http connection (net/http.(*conn).serve: HTTP/1, TLS handshake, h2 too)", "^net/http\\.\\(\\*conn\\)\\.serve$")
			pat("metalgate handler (dataplane.(*Server).ServeHTTP)", "^github\\.com/metalgate/metalgate/proxy/dataplane\\.\\(\\*Server\\)\\.ServeHTTP")
			pat("  httputil.ReverseProxy", "^net/http/httputil\\.\\(\\*ReverseProxy\\)\\.ServeHTTP")
			pat("  upstream HTTP/1.1 exchange (dataplane h1Transport, h1Conn)", "^github\\.com/metalgate/metalgate/proxy/dataplane\\.\\(\\*h1")
			pat("GC (gcBgMarkWorker, gcDrain, assists)", "^runtime\\.(gcBgMarkWorker|gcDrain|gcAssistAlloc)")
			pat("malloc (runtime.mallocgc)", "^runtime\\.mallocgc")
			pat("scheduler (runtime.schedule)", "^runtime\\.schedule$")
			pat("in the kernel", "^KERNEL$")
		}
		/^$/ { flush(); next }
		{
			# a frame: "<ip> <symbol> (<dso>)"
			dso = $NF; sym = $0; sub(/^[ \t]*[0-9a-f]+[ \t]+/, "", sym); sub(/[ \t]+\([^()]*\)$/, "", sym); sub(/\+0x[0-9a-f]+$/, "", sym)
			if (n == 0) { leafsym = sym; leafdso = dso }
			frame[++n] = (dso ~ /kernel/ ? "KERNEL" : sym)
		}
		END {
			flush()
			printf "      self time by group (%d samples):\n", total
			for (c in self) printf "        %5.1f%%  %s\n", 100 * self[c] / total, c | "sort -rn"
			close("sort -rn")
			printf "      inclusive (samples with the frame on the stack):\n"
			for (j = 1; j <= np; j++) printf "        %5.1f%%  %s\n", 100 * incl[j] / total, label[j]
		}'
	echo "      top functions (self):"
	perf report -i "$data" --pid "$pids" --percentage relative --no-children -g none --sort sym --stdio 2>/dev/null |
		awk '/^ +[0-9.]+%/ && n++ < 20 { print "        " $0 }'
}
profile_c() { # perf.data pids of nginx: self time by library, top functions
	local data=$1 pids=$2
	perf script -i "$data" --pid "$pids" -F ip,sym,dso 2>/dev/null | awk '
		/^$/ { n = 0; next }
		n++ == 0 {
			dso = $NF; gsub(/[()]/, "", dso); sub(/.*\//, "", dso)
			if (dso ~ /kernel/) dso = "kernel (syscalls, TCP/IP)"
			else if (dso ~ /^libcrypto/) dso = dso " (crypto primitives)"
			else if (dso ~ /^libssl/) dso = dso " (TLS protocol, records)"
			else if (dso ~ /^libc\./) dso = dso " (malloc, syscall wrappers, string functions)"
			self[dso]++; total++
		}
		END {
			printf "      self time by library (%d samples):\n", total
			for (d in self) printf "        %5.1f%%  %s\n", 100 * self[d] / total, d | "sort -rn"
			close("sort -rn")
		}'
	echo "      top functions (self):"
	perf report -i "$data" --pid "$pids" --percentage relative --no-children -g none --sort dso,sym --stdio 2>/dev/null |
		awk '/^ +[0-9.]+%/ && n++ < 15 { print "        " $0 }'
}
if [ -n "$PROFILE" ]; then
	# With pinning, the whole proxy core is sampled (-C) and the proxy's samples picked out by
	# pid: perf record -p misses threads the Go runtime starts during the run.
	where="-C $PROXY_CPUS"
	[ -n "$PROXY_CPUS" ] || where=
	echo ">> profiles: perf record -F 2999 -g -e cpu-clock ${where:-"-p <pid>"} during one more $DURATION run of each scenario"
	[ -z "$PROFILE_DIR" ] || { mkdir -p "$PROFILE_DIR"; cp "$tmp/metalgate" "$PROFILE_DIR/"; }
	for sc in $SCENARIOS; do
		for n in metalgate nginx; do
			has "$PROXIES" "$n" || continue
			port=${PORT[$n]}
			[ "$sc" = h1 ] || port=${TLS_PORT[$n]}
			load "$sc" "$port" 2s >/dev/null
			# nginx: the worker(s); metalgate: the process
			targets=${PID[$n]}
			[ "$n" != nginx ] || targets=$(pgrep -P "${PID[$n]}" | paste -sd,)
			perf record -F 2999 -g -e cpu-clock ${where:-"-p $targets"} -o "$tmp/perf-$sc-$n.data" >/dev/null 2>&1 &
			perf_pid=$!
			sleep 0.5
			t0=$(cpu_ticks "${PID[$n]}")
			out=$(load "$sc" "$port" "$DURATION")
			t1=$(cpu_ticks "${PID[$n]}")
			kill -INT $perf_pid
			wait $perf_pid || true
			read -r reqs _ < <(parse "$sc" "$out")
			echo "   [$sc $n] $(awk -v d=$((t1 - t0)) -v t="$TCK" -v n="$reqs" 'BEGIN { printf "%.1f", d / t * 1e6 / n }') µs/req under perf; $(title "$sc")"
			if [ "$n" = metalgate ]; then profile_go "$tmp/perf-$sc-$n.data" "$targets"; else profile_c "$tmp/perf-$sc-$n.data" "$targets"; fi
			[ -z "$PROFILE_DIR" ] || cp "$tmp/perf-$sc-$n.data" "$PROFILE_DIR/"
		done
	done
fi

# --- control plane ---------------------------------------------------------------------------
update_p99=NA update_p50=NA rss10k=NA scale="SCALE not measured (SKIP_CONTROLPLANE)"
if [ -n "${SKIP_CONTROLPLANE:-}" ]; then
	echo ">> SKIP_CONTROLPLANE set: endpoint update latency and 10k table not measured"
else
	if [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]; then
		echo ">> endpoint update latency through kube-apiserver (envtest, 25 changes)"
		line=$(go test -count=1 -run '^TestEndpointUpdateLatency$' -v ./proxy/controlplane/ 2>&1 | tee "$tmp/update.log" | grep '^ENDPOINT_UPDATE' || true)
		echo "   $line"
		update_p50=$(echo "$line" | sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p')
		update_p99=$(echo "$line" | sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p')
		[ -n "$update_p99" ] || { cat "$tmp/update.log"; update_p99=NA; }
	else
		echo "!! no kube-apiserver in $KUBEBUILDER_ASSETS (run 'make kube-bin'): endpoint update latency not measured" >&2
	fi
	echo ">> table of 10,000 Ingresses and 100,000 endpoints (in-process: build time, heap, peak RSS)"
	scale=$(METALGATE_SCALE_TEST=1 go test -count=1 -run '^TestScale10kIngresses$' -v ./proxy/ingress/ | grep '^SCALE')
	echo "   $scale"
	rss10k=$(echo "$scale" | sed -n 's/.*rss_hwm_mib=\([0-9.]*\).*/\1/p')
fi

# --- report ----------------------------------------------------------------------------------
ratio() { # a b: a/b with two decimals, NA when either is missing
	awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "NA"; else printf "%.2f", a / b }'
}
echo
# cpu_us/req: CPU time the proxy spent per request (lowest over the rounds); cpu/nginx: that
# over nginx's. When the load side (the client and the backend share LOAD_CPUS) is the
# bottleneck, req/s converge and this is the efficiency figure. rss_mib: peak RSS since the
# proxy started (the scenarios run in the order shown, on the same processes). rps/nginx and
# p99/nginx: req/s and p99 over nginx's (the best round's).
for sc in $SCENARIOS; do
	echo "== $(title "$sc"): $(client_cmd "$sc")"
	printf '%-10s %12s %10s %10s %8s %11s %10s %10s %10s %10s\n' proxy req/s p50_ms p99_ms cpu_% cpu_us/req cpu/nginx rss_mib rps/nginx p99/nginx
	for n in $PROXIES; do
		k=$sc/$n
		printf '%-10s %12s %10s %10s %8s %11s %10s %10s %10s %10s\n' "$n" "${RPS[$k]}" "${P50[$k]}" "${P99[$k]}" "${CPU[$k]}" \
			"${USREQ[$k]}" "$(ratio "${USREQ[$k]}" "${USREQ[$sc/nginx]}")" "${RSS[$k]}" "$(ratio "${RPS[$k]}" "${RPS[$sc/nginx]}")" \
			"$(ratio "${P99[$k]}" "${P99[$sc/nginx]}")"
	done
	case $sc in
	new-*)
		printf 'new connections per second of one core (1e6 / cpu_us): %s; vs nginx: %s\n' \
			"$(for n in $PROXIES; do printf '%s %.0f  ' "$n" "$(awk -v u="${USREQ[$sc/$n]}" 'BEGIN { print 1e6 / u }')"; done)" \
			"$(for n in $PROXIES; do printf '%s %s  ' "$n" "$(ratio "${USREQ[$sc/nginx]}" "${USREQ[$sc/$n]}")"; done)"
		;;
	esac
	echo
done
# The peer table: every scenario's CPU per request over nginx's, one column per proxy (lower is
# better; for new-*, the CPU per new connection, the inverse of the connections per core).
echo "== peers: CPU per request over nginx's (lower is better), p99 over nginx's in brackets"
printf '%-10s' scenario
for n in $PROXIES; do printf ' %18s' "$n"; done
echo
for sc in $SCENARIOS; do
	printf '%-10s' "$sc"
	for n in $PROXIES; do
		printf ' %18s' "$(ratio "${USREQ[$sc/$n]:-}" "${USREQ[$sc/nginx]:-}") ($(ratio "${P99[$sc/$n]:-}" "${P99[$sc/nginx]:-}"))"
	done
	echo
done
echo
echo "endpoint update (change → first request on the new endpoint): p50 ${update_p50} ms, p99 ${update_p99} ms"
echo "10k Ingresses / 100k endpoints: ${scale#SCALE }"
cpu_ratio_of() { ratio "${USREQ[$1/metalgate]:-}" "${USREQ[$1/${2:-nginx}]:-}"; } # scenario [peer]: metalgate's CPU per request over the peer's
hs_ratio_of() { ratio "${USREQ[$1/nginx]:-}" "${USREQ[$1/metalgate]:-}"; } # handshakes per CPU-second, metalgate over nginx
echo "RESULT proxy_rps_ratio_vs_nginx=$(ratio "${RPS[h1/metalgate]:-}" "${RPS[h1/nginx]:-}")" \
	"proxy_p99_ratio_vs_nginx=$(ratio "${P99[h1/metalgate]:-}" "${P99[h1/nginx]:-}")" \
	"endpoint_update_p99_ms=$update_p99 proxy_rss_mib_10k_ingresses=$rss10k" \
	"proxy_cpu_per_req_ratio_vs_nginx=$(cpu_ratio_of h1)" \
	"proxy_cpu_per_req_ratio_vs_nginx_tls=$(cpu_ratio_of tls-ecdsa)" \
	"proxy_cpu_per_req_ratio_vs_nginx_tls_rsa=$(cpu_ratio_of tls-rsa)" \
	"proxy_cpu_per_req_ratio_vs_nginx_h2=$(cpu_ratio_of h2)" \
	"tls_handshakes_ratio_vs_nginx=$(hs_ratio_of new-ecdsa)" \
	"tls_handshakes_ratio_vs_nginx_rsa=$(hs_ratio_of new-rsa)" \
	"proxy_cpu_per_req_ratio_vs_haproxy_h1=$(cpu_ratio_of h1 haproxy)" \
	"proxy_cpu_per_req_ratio_vs_haproxy_h2=$(cpu_ratio_of h2 haproxy)" \
	"proxy_cpu_per_req_ratio_vs_caddy_h1=$(cpu_ratio_of h1 caddy)"
