# e2e/demo.mk — make demo (the lab replays metalgate's story), make image, make cluster (kind).
# Included by the top-level Makefile after e2e/lab.mk (uses ROOT, BIN, LAB_*, LAB_GO_BUILD).

DEMO_WATCH ?= 2m
DEMO_MODE ?= l2
export DEMO_MODE
export DEMO_WATCH
DEMO := $(BIN)/metalgate-demo

.PHONY: demo-tool
demo-tool:
	@$(LAB_GO_BUILD) -o $(DEMO) ./e2e/cmd/demo

.PHONY: demo-check-root
demo-check-root:
	@if [ "$$(id -u)" != 0 ] || [ "$$(uname -s)" != Linux ]; then \
	  echo "make demo needs root on Linux: the lab is network namespaces (sudo make demo)"; exit 1; fi

.PHONY: demo
demo: demo-check-root ## The story: lab up, operator, three tenants with their own proxies and VIPs, a misinstalled proxy watched for DEMO_WATCH (2m), then installed properly (own VIP) and watched again: one value per Ingress, the reason printed. DEMO_MODE=bgp: announced by BGP to the lab router. Leaves the lab up.
	@echo ">> [$$(date -u +%T)] lab up (LAB_PREFIX=$(LAB_PREFIX)); the first run builds Kubernetes (~15 min on 2 cores), later ones take ~30 s"
	@$(MAKE) --no-print-directory lab-up
	@$(MAKE) --no-print-directory demo-tool
	@$(DEMO) run

.PHONY: demo-down
demo-down: ## Take the demo's lab down (same as lab-down).
	@$(MAKE) --no-print-directory lab-down

# ---- image and kind ------------------------------------------------------------------------
.PHONY: image
image: lab-images ## The operator image without Docker: _out/images/metalgate.tar (kind load image-archive / ctr images import).
	@echo ">> image: $(LAB_IMAGES)/metalgate.tar (ghcr.io/metalgate/metalgate:dev)"

KIND ?= kind
KIND_CLUSTER ?= metalgate
KIND_KUBECTL ?= kubectl --context kind-$(KIND_CLUSTER)
KIND_OUT := $(ROOT)/_out/kind

.PHONY: cluster
cluster: ## A kind cluster (1 control plane + 2 workers) running metalgate (the Helm chart: operator, pool, proxy) and a sample app; prints how to reach its VIP.
	@for t in docker $(KIND) kubectl; do command -v $$t >/dev/null || { \
	  echo "make cluster needs '$$t' on PATH (Docker engine, kind: https://kind.sigs.k8s.io, kubectl)"; exit 1; }; done
	@docker info >/dev/null 2>&1 || { echo "make cluster: the Docker engine is not reachable (docker info failed)"; exit 1; }
	@if $(KIND) get clusters 2>/dev/null | grep -qx '$(KIND_CLUSTER)'; then echo ">> kind cluster $(KIND_CLUSTER) exists"; \
	  else $(KIND) create cluster --name $(KIND_CLUSTER) --config config/kind/cluster.yaml; fi
	@$(MAKE) --no-print-directory image demo-tool helm
	$(KIND) load image-archive --name $(KIND_CLUSTER) $(LAB_IMAGES)/metalgate.tar
	$(KIND) load image-archive --name $(KIND_CLUSTER) $(LAB_IMAGES)/echo.tar
	@mkdir -p $(KIND_OUT)
	@subnets="$$(docker network inspect kind -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}')"; \
	  echo ">> kind network: $$subnets"; $(DEMO) kind-pool $$subnets > $(KIND_OUT)/pool.yaml
	@# The chart installs the operator, the pool (the address range of kind-pool's manifest, with
	@# an L2Advertisement) and the proxy; config/kind is the same install with kustomize.
	@range="$$(sed -n 's/^ *- \([0-9.]*-[0-9.]*\)$$/\1/p' $(KIND_OUT)/pool.yaml)"; \
	  [ -n "$$range" ] || { echo "no address range in $(KIND_OUT)/pool.yaml"; exit 1; }; \
	  echo ">> helm upgrade --install metalgate charts/metalgate (pool $$range)"; \
	  $(HELM) upgrade --install metalgate charts/metalgate --kube-context kind-$(KIND_CLUSTER) \
	    --namespace metalgate-system --create-namespace -f config/kind/values.yaml \
	    --set-json "pools=[{\"name\":\"default\",\"spec\":{\"addresses\":[\"$$range\"]},\"l2Advertisement\":{}}]" \
	    --wait --timeout 5m
	$(KIND_KUBECTL) apply -k config/kind/samples
	$(KIND_KUBECTL) -n metalgate-system rollout status deployment/metalgate-controller --timeout=180s
	$(KIND_KUBECTL) -n metalgate-system rollout status daemonset/metalgate-speaker --timeout=180s
	$(KIND_KUBECTL) -n metalgate-system rollout status deployment/metalgate-proxy --timeout=180s
	$(KIND_KUBECTL) -n demo rollout status deployment/echo --timeout=180s
	@vip=""; for i in $$(seq 60); do \
	  vip="$$($(KIND_KUBECTL) -n metalgate-system get svc metalgate-proxy -o jsonpath='{.status.loadBalancer.ingress[0].ip}')"; \
	  [ -n "$$vip" ] && break; sleep 1; done; \
	  [ -n "$$vip" ] || { echo "the proxy Service got no VIP: $(KIND_KUBECTL) -n metalgate-system describe svc metalgate-proxy"; exit 1; }; \
	  echo; echo "metalgate runs in kind cluster $(KIND_CLUSTER); the proxy's VIP is $$vip (pool: $(KIND_OUT)/pool.yaml)."; \
	  echo "From this host (Linux: the kind Docker network is directly reachable):"; \
	  echo "  curl -s http://$$vip/ -H 'Host: echo.kind.test'"; \
	  echo "  $(KIND_KUBECTL) get svc,ingress -A"; \
	  echo "Remove it: make cluster-down"

.PHONY: cluster-down
cluster-down: ## Delete the kind cluster of make cluster.
	$(KIND) delete cluster --name $(KIND_CLUSTER)
