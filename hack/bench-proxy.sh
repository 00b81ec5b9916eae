#!/usr/bin/env bash
# Proxy benchmark: metalgate's data plane against nginx and haproxy as equivalent reverse
# proxies (HTTP/1.1, upstream keep-alive, forwarding headers) in front of the same backend
# (e2e/cmd/echo), all on 127.0.0.1, driven by wrk with keep-alive. Then the control-plane
# numbers: endpoint change → first request routed to the new endpoint through a real
# kube-apiserver (envtest), and the memory of a table of 10,000 Ingresses / 100,000 endpoints.
#
# Prints a table and, as its last line:
#   RESULT proxy_rps_ratio_vs_nginx=<x> proxy_p99_ratio_vs_nginx=<x> endpoint_update_p99_ms=<n> proxy_rss_mib_10k_ingresses=<n> proxy_cpu_per_req_ratio_vs_nginx=<x>
#
# CPU per request is the efficiency figure: utime+stime of the proxy's processes (nginx: master
# and workers) from /proc/<pid>/stat, read before and after the measured wrk run, divided by the
# requests wrk completed in it. Unlike req/s it does not depend on whether the proxy or the load
# side (wrk and the backend) is the bottleneck, nor much on other load on the machine. Like is
# compared with like: WORKERS sets nginx worker_processes, haproxy nbthread and metalgate
# GOMAXPROCS to the same number, and all three are pinned to the same PROXY_CPUS.
#
# Usage: hack/bench-proxy.sh   Environment (defaults): DURATION=10s CONNECTIONS=64 THREADS=2
#   WORKERS=1 (nginx worker_processes = haproxy nbthread = metalgate GOMAXPROCS)
#   PROXY_CPUS=1 LOAD_CPUS=0 (taskset lists: proxies on one set, wrk and the backend on the
#   other; empty disables pinning) ROUNDS=1 (each proxy measured ROUNDS times, interleaved;
#   the best round counts) KUBEBUILDER_ASSETS (default ./bin/k8s-v1.35.4).
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
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$ROOT/bin/k8s-v1.35.4}

BACKEND_PORT=18080 METALGATE_PORT=18081 NGINX_PORT=18082 HAPROXY_PORT=18083 ADMIN_PORT=18091

# --- tools (idempotent) ----------------------------------------------------------------------
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
if [ ${#missing[@]} -gt 0 ]; then
	echo ">> installing ${missing[*]}"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)

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

echo ">> building metalgate and the echo backend"
CGO_ENABLED=0 go build -trimpath -o "$tmp/metalgate" ./cmd/metalgate
CGO_ENABLED=0 go build -trimpath -o "$tmp/echo" ./e2e/cmd/echo

wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "nothing listening on port $1" >&2
	return 1
}

for port in $BACKEND_PORT $METALGATE_PORT $NGINX_PORT $HAPROXY_PORT $ADMIN_PORT; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "port $port is already in use (a previous run still going?); stop it first" >&2
		exit 1
	fi
done

# --- backend ---------------------------------------------------------------------------------
spawn "$LOAD_CPUS" "$tmp/echo" -listen "127.0.0.1:$BACKEND_PORT" >"$tmp/echo.log" 2>&1
pids+=($!)
wait_port $BACKEND_PORT

# --- metalgate (static table: same objects the control plane would read) ---------------------
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
GOMAXPROCS=$WORKERS spawn "$PROXY_CPUS" "$tmp/metalgate" proxy --static-config "$tmp/static.yaml" \
	--http-bind-address "127.0.0.1:$METALGATE_PORT" --https-bind-address 0 --admin-bind-address "127.0.0.1:$ADMIN_PORT" \
	>"$tmp/metalgate.log" 2>&1
metalgate_pid=$!
pids+=($metalgate_pid)

# --- nginx -----------------------------------------------------------------------------------
mkdir -p "$tmp/nginx"
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
    location / {
      proxy_pass http://echo;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      proxy_set_header X-Forwarded-For \$remote_addr;
      proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_set_header X-Real-IP \$remote_addr;
    }
  }
}
CONF
spawn "$PROXY_CPUS" "$NGINX" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" >"$tmp/nginx/stdout" 2>&1
nginx_pid=$!
pids+=($nginx_pid)

# --- haproxy ---------------------------------------------------------------------------------
cat >"$tmp/haproxy.cfg" <<CONF
global
  nbthread $WORKERS
  maxconn 4096
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
backend be
  server echo 127.0.0.1:$BACKEND_PORT maxconn 2000
CONF
spawn "$PROXY_CPUS" "$HAPROXY" -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1
haproxy_pid=$!
pids+=($haproxy_pid)

wait_port $METALGATE_PORT
wait_port $NGINX_PORT
wait_port $HAPROXY_PORT

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

declare -A RPS P50 P99 CPU RSS USREQ
run_one() { # name port pid
	local name=$1 port=$2 pid=$3 out t0 t1 rps p50 p99 secs reqs usreq
	pin "$LOAD_CPUS" wrk -t"$THREADS" -c"$CONNECTIONS" -d2s "http://127.0.0.1:$port/" >/dev/null # warm up
	t0=$(cpu_ticks "$pid")
	out=$(pin "$LOAD_CPUS" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency "http://127.0.0.1:$port/")
	t1=$(cpu_ticks "$pid")
	echo "$out" | sed "s/^/   [$name] /"
	if echo "$out" | grep -q "Non-2xx"; then
		echo "!! $name answered non-2xx responses" >&2
	fi
	rps=$(echo "$out" | awk '/^Requests\/sec:/ {print $2}')
	p50=$(to_ms "$(echo "$out" | awk '$1 == "50%" {print $2}')")
	p99=$(to_ms "$(echo "$out" | awk '$1 == "99%" {print $2}')")
	reqs=$(echo "$out" | awk '/ requests in / {print $1}')
	secs=${DURATION%s}
	# CPU µs per request over this run: ticks → µs, over the requests wrk completed.
	usreq=$(awk -v d=$((t1 - t0)) -v t="$TCK" -v n="$reqs" 'BEGIN { printf "%.1f", d / t * 1e6 / n }')
	echo "   [$name] CPU $((t1 - t0)) ticks for $reqs requests: $usreq µs/req"
	if [ -z "${RPS[$name]:-}" ] || awk -v a="$rps" -v b="${RPS[$name]}" 'BEGIN { exit !(a > b) }'; then
		RPS[$name]=$rps P50[$name]=$p50 P99[$name]=$p99
		CPU[$name]=$(awk -v d=$((t1 - t0)) -v t="$TCK" -v s="$secs" 'BEGIN { printf "%.0f", 100 * d / t / s }')
	fi
	# The lowest CPU per request over the rounds counts (interference only ever adds CPU).
	if [ -z "${USREQ[$name]:-}" ] || awk -v a="$usreq" -v b="${USREQ[$name]}" 'BEGIN { exit !(a < b) }'; then
		USREQ[$name]=$usreq
	fi
	RSS[$name]=$(awk -v k="$(hwm_kib "$pid")" 'BEGIN { printf "%.1f", k / 1024 }')
}

echo ">> wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency; proxies pinned to CPUs '${PROXY_CPUS:-any}' with $WORKERS worker(s), wrk and backend to '${LOAD_CPUS:-any}'"
for round in $(seq "$ROUNDS"); do
	run_one metalgate $METALGATE_PORT $metalgate_pid
	run_one nginx $NGINX_PORT $nginx_pid
	run_one haproxy $HAPROXY_PORT $haproxy_pid
done

# --- control plane ---------------------------------------------------------------------------
update_p99=NA update_p50=NA
if [ -n "${SKIP_CONTROLPLANE:-}" ]; then
	echo ">> SKIP_CONTROLPLANE set: endpoint update latency and 10k table not measured"
elif [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]; then
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
scale=SCALE
[ -n "${SKIP_CONTROLPLANE:-}" ] || scale=$(METALGATE_SCALE_TEST=1 go test -count=1 -run '^TestScale10kIngresses$' -v ./proxy/table/ | grep '^SCALE')
echo "   $scale"
rss10k=$(echo "$scale" | sed -n 's/.*rss_hwm_mib=\([0-9.]*\).*/\1/p')

# --- report ----------------------------------------------------------------------------------
echo
# cpu_us/req: CPU time the proxy spent per request (lowest over the rounds); cpu/nginx: that
# over nginx's. When the load side (wrk and the backend share LOAD_CPUS) is the bottleneck,
# req/s converge and this is the efficiency figure.
printf '%-10s %12s %10s %10s %8s %11s %10s %10s %10s\n' proxy req/s p50_ms p99_ms cpu_% cpu_us/req cpu/nginx rss_mib rps/nginx
for n in metalgate nginx haproxy; do
	printf '%-10s %12s %10s %10s %8s %11s %10s %10s %10s\n' "$n" "${RPS[$n]}" "${P50[$n]}" "${P99[$n]}" "${CPU[$n]}" \
		"${USREQ[$n]}" "$(awk -v a="${USREQ[$n]}" -v b="${USREQ[nginx]}" 'BEGIN { printf "%.2f", a / b }')" "${RSS[$n]}" \
		"$(awk -v a="${RPS[$n]}" -v b="${RPS[nginx]}" 'BEGIN { printf "%.2f", a / b }')"
done
echo "endpoint update (change → first request on the new endpoint): p50 ${update_p50} ms, p99 ${update_p99} ms"
echo "10k Ingresses / 100k endpoints: ${scale#SCALE }"
rps_ratio=$(awk -v a="${RPS[metalgate]}" -v b="${RPS[nginx]}" 'BEGIN { printf "%.2f", a / b }')
p99_ratio=$(awk -v a="${P99[metalgate]}" -v b="${P99[nginx]}" 'BEGIN { printf "%.2f", a / b }')
cpu_ratio=$(awk -v a="${USREQ[metalgate]}" -v b="${USREQ[nginx]}" 'BEGIN { printf "%.2f", a / b }')
echo "RESULT proxy_rps_ratio_vs_nginx=$rps_ratio proxy_p99_ratio_vs_nginx=$p99_ratio endpoint_update_p99_ms=$update_p99 proxy_rss_mib_10k_ingresses=$rss10k proxy_cpu_per_req_ratio_vs_nginx=$cpu_ratio"
