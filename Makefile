# metalgate — build, generate, lint, test, benchmark.
# Everything a target needs is installed by the target itself: Go tools into ./bin (pinned,
# cached), Kubernetes binaries built from the Go module proxy into ./bin/k8s-<version>, Debian
# packages through hack/deps.sh when missing.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

ROOT := $(abspath .)
BIN := $(ROOT)/bin
KUBE_VERSION := v1.35.4
KUBE_BIN := $(BIN)/k8s-$(KUBE_VERSION)
CONTROLLER_GEN_VERSION := v0.20.1
STATICCHECK_VERSION := v0.8.2
HELM_VERSION := v4.3.1
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)
HELM := $(BIN)/helm-$(HELM_VERSION)
# The release version, from git tags (a release is a tag vX.Y.Z): vX.Y.Z on the tag,
# vX.Y.Z-N-g<commit> N commits after it, -dirty with uncommitted changes; v0.0.0-dev+<commit>[.dirty]
# where no v* tag is reachable. REVISION is the full commit. Both go into the binary
# (metalgate version), the image tag and the chart (make version prints them).
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo "v0.0.0-dev+$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$$(git diff --quiet HEAD -- 2>/dev/null || echo .dirty)")
# The chart's version is the release's without the leading v (Helm's convention); its
# appVersion is the release version itself, which is also the image tag the chart defaults to.
CHART_VERSION ?= $(patsubst v%,%,$(VERSION))
# Image tags and label values may not hold "+": v0.0.0-dev+1a2b3c4 is tagged v0.0.0-dev-1a2b3c4
# (a release's tag vX.Y.Z is unchanged).
IMAGE_TAG ?= $(subst +,-,$(VERSION))
VERSION_PKG := github.com/metalgate/metalgate/cmd/metalgate/internal/version
LDFLAGS := -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION)
GO_TEST_FLAGS ?=
# Every go command make runs (tests, vet, builds) compiles with -trimpath: the build cache's
# keys then do not depend on where the checkout is, so a fresh clone at a new path (CI's) reuses
# what an earlier clone compiled instead of compiling every package of this module again (about
# 120 CPU-seconds of the race build alone, measured).
GOFLAGS += -trimpath
export GOFLAGS

# envtest-style assets: kube-apiserver and kubectl built here, etcd from Debian.
export KUBEBUILDER_ASSETS := $(KUBE_BIN)
# The helm the chart tests run (config/chart_test.go; they say they are skipped without it).
export HELM

.PHONY: build
build: ## Build bin/metalgate and the kubectl plugin bin/kubectl-metalgate.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/metalgate ./cmd/metalgate
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/kubectl-metalgate ./cmd/kubectl-metalgate

.PHONY: version
version: ## Print the version, revision, chart version and image tag this checkout builds (from git tags).
	@echo "VERSION=$(VERSION)"
	@echo "REVISION=$(REVISION)"
	@echo "CHART_VERSION=$(CHART_VERSION)"
	@echo "IMAGE_TAG=$(IMAGE_TAG)"

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# ---- tools ----------------------------------------------------------------------------------
$(CONTROLLER_GEN):
	@echo ">> installing controller-gen $(CONTROLLER_GEN_VERSION) into ./bin"
	GOBIN=$(BIN)/.tmp-cg go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/.tmp-cg/controller-gen $@ && rmdir $(BIN)/.tmp-cg

$(STATICCHECK):
	@echo ">> installing staticcheck $(STATICCHECK_VERSION) into ./bin"
	GOBIN=$(BIN)/.tmp-sc go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN)/.tmp-sc/staticcheck $@ && rmdir $(BIN)/.tmp-sc

# helm from the Go module proxy (a tool build: go.mod stays as it is); 15-30 minutes on 2 busy
# cores the first time, cached after.
$(HELM):
	@echo ">> installing helm $(HELM_VERSION) into ./bin"
	GOBIN=$(BIN)/.tmp-helm go install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/.tmp-helm/helm $@ && rmdir $(BIN)/.tmp-helm

.PHONY: helm
helm: $(HELM) ## Install helm $(HELM_VERSION) into ./bin (pinned).

# Caddy, a peer of make bench-proxy: built from its own module hack/caddy (version pinned in its
# go.mod, so the project's go.mod does not gain Caddy) into ./bin/caddy-<version>, only when
# missing; 5-10 minutes on 2 busy cores the first time. hack/bench-proxy.sh runs the same script
# when PROXIES includes caddy.
.PHONY: caddy
caddy: ## Build Caddy (hack/caddy, pinned, from the Go module proxy) into ./bin (cached).
	hack/caddy/build.sh $(BIN)

.PHONY: deps
deps: ## Install the Debian packages the tests need (when missing).
	hack/deps.sh

.PHONY: kube-bin
kube-bin: deps ## Build kube-apiserver and kubectl $(KUBE_VERSION) into ./bin (cached) and link etcd.
	hack/build-k8s.sh $(KUBE_BIN) kube-apiserver kubectl
	ln -sf "$$(command -v etcd)" $(KUBE_BIN)/etcd

# ---- generate -------------------------------------------------------------------------------
.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy, CRD YAML and RBAC from the Go sources.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=metalgate-controller paths=./controllers/... output:rbac:artifacts:config=config/rbac/controller
	@# Two proxies, two roles: the Ingress proxy's markers (proxy/controlplane) and the
	@# Gateway proxy's (proxy/controlplane/gatewayrbac), each with the admin port's (proxy/dataplane).
	$(CONTROLLER_GEN) rbac:roleName=metalgate-proxy paths="./proxy/controlplane;./proxy/dataplane/..." output:rbac:artifacts:config=config/rbac/proxy
	$(CONTROLLER_GEN) rbac:roleName=metalgate-gateway-proxy paths="./proxy/controlplane/gatewayrbac;./proxy/dataplane/..." output:rbac:artifacts:config=config/rbac/gateway-proxy
	@# The Helm chart installs the same CRDs: one source (config/crd/bases), copied.
	rm -f charts/metalgate/crds/*.yaml && cp config/crd/bases/*.yaml charts/metalgate/crds/

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files are stale.
	@if [ -n "$$(git status --porcelain -- api config/crd config/rbac charts/metalgate/crds)" ]; then \
	  echo "generated files are stale: run 'make generate' and commit"; git status --porcelain -- api config/crd config/rbac charts/metalgate/crds; git diff --stat -- api config charts; exit 1; fi

# ---- lint -----------------------------------------------------------------------------------
.PHONY: lint
lint: $(STATICCHECK) ## gofmt, go vet, staticcheck (with the e2e and daytwo tags: every file; no file is built only without them).
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	go vet -tags 'e2e daytwo' ./...
	$(STATICCHECK) -tags 'e2e daytwo' ./...
	cd e2e/conformance && go vet ./... && $(STATICCHECK) ./...

# ---- tests ----------------------------------------------------------------------------------
.PHONY: test-unit
test-unit: ## Fast tests: pure logic, no API server, no network namespaces (those say they are skipped); under 2 minutes warm.
	env -u KUBEBUILDER_ASSETS go test $(GO_TEST_FLAGS) -short -count=1 ./...
	cd e2e/conformance && env -u KUBEBUILDER_ASSETS go test $(GO_TEST_FLAGS) -short -count=1 ./...

# As root, the netns tests (speaker ARP/NDP, BGP against FRR) need the lab's Debian packages.
.PHONY: test-deps
test-deps: kube-bin $(HELM)
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory lab-deps; \
	  else echo "not root: tests that need network namespaces will say they are skipped"; fi

.PHONY: test-integration
test-integration: test-deps ## Tests against a real kube-apiserver + etcd (and, as root, netns + FRR).
	go test $(GO_TEST_FLAGS) -count=1 -race ./...
	cd e2e/conformance && go test $(GO_TEST_FLAGS) -count=1 ./...

# make test runs the e2e suite in a lab of its own (prefix mt-), so a developer's lab (mg-) is
# left alone, and takes that lab down again whatever happened.
TEST_LAB := LAB_PREFIX=mt- LAB_DIR=$(ROOT)/_out/lab-mt-

.PHONY: test-e2e
test-e2e: ## As root on Linux: a throwaway lab, every e2e test, then lab-down.
	@if [ "$$(id -u)" != 0 ] || [ "$$(uname -s)" != Linux ]; then \
	  echo "SKIPPED e2e: the lab needs root on Linux (network namespaces); CI runs it as root"; exit 0; fi; \
	rc=0; $(MAKE) --no-print-directory e2e $(TEST_LAB) || rc=$$?; \
	$(MAKE) --no-print-directory lab-down $(TEST_LAB) || { [ $$rc != 0 ] || rc=1; }; exit $$rc

# The Gateway API conformance suite (docs/conformance/README.md) in a lab of its own (prefix
# cf-), brought up or reused, left up for the next run (make lab-down LAB_PREFIX=cf- removes it).
CONFORMANCE_LAB := LAB_PREFIX=cf- LAB_DIR=$(ROOT)/_out/lab-cf-
# make test runs it in a throwaway lab (prefix ct-), taken down whatever happened; its report
# goes to _out/conformance/ (make conformance writes the committed one in docs/conformance/).
TEST_CONFORMANCE_LAB := LAB_PREFIX=ct- LAB_DIR=$(ROOT)/_out/lab-ct-

.PHONY: test-conformance
test-conformance: ## As root on Linux: the Gateway API conformance suite in a throwaway lab (part of make test).
	@if [ "$$(id -u)" != 0 ] || [ "$$(uname -s)" != Linux ]; then \
	  echo "SKIPPED conformance: the lab needs root on Linux (network namespaces); CI runs it as root"; exit 0; fi; \
	rc=0; $(MAKE) --no-print-directory e2e-deploy $(TEST_CONFORMANCE_LAB) && \
	  $(TEST_CONFORMANCE_LAB) CONFORMANCE_REPORT=$(ROOT)/_out/conformance/report.yaml hack/conformance.sh || rc=$$?; \
	$(MAKE) --no-print-directory lab-down $(TEST_CONFORMANCE_LAB) || { [ $$rc != 0 ] || rc=1; }; exit $$rc

.PHONY: conformance
conformance: ## As root on Linux: Gateway API conformance (v1.5.1, GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS) against the lab cf-; report and features table in docs/conformance/. CONFORMANCE_RUN_TEST=<name>: one test.
	@if [ "$$(id -u)" != 0 ] || [ "$$(uname -s)" != Linux ]; then \
	  echo "conformance: needs root on Linux (the lab's network namespaces)"; exit 1; fi
	@$(MAKE) --no-print-directory e2e-deploy $(CONFORMANCE_LAB)
	@$(CONFORMANCE_LAB) hack/conformance.sh

# Day 2 (e2e/daytwo_test.go, TestDayTwo, build tags e2e daytwo): the previous release installed
# with helm install, upgraded with helm upgrade to this checkout, rolled, frozen and cut under
# steady client load. There is no release tag yet, so the previous release is a fixed earlier
# main commit, built from its own source (git archive into $(DAYTWO_DIR)/src): its binary into an
# image tagged $(DAYTWO_IMAGE_REF) (distinct from this tree's :dev, so both are on the nodes) and
# its chart. e26e34d (the merge of the layer-2 hold) is the oldest commit whose speakers keep their
# layer-2 VIPs through their own rollout, so the upgrade's speaker rollout moves none (an older
# speaker leaves without a hold and its VIPs fail over, resetting connections in flight). The
# previous one, f0b5b8b, was the oldest whose chart installs in the lab and whose proxy drains on
# SIGTERM: an upgrade stops the old pods with the old release's pod spec and binary, so what the
# old release does on the way out counts. Move it to the last release tag once there is one.
DAYTWO_FROM ?= e26e34d423079ff46804f5d00a80153f347de8af
DAYTWO_DIR := $(ROOT)/_out/daytwo-from
DAYTWO_IMAGE_REF := ghcr.io/metalgate/metalgate:daytwo-from
# make test runs it in a throwaway lab of its own (prefix dt-), taken down whatever happened.
TEST_DAYTWO_LAB := LAB_PREFIX=dt- LAB_DIR=$(ROOT)/_out/lab-dt-

.PHONY: daytwo-from
daytwo-from: ## Build the previous release (DAYTWO_FROM) for TestDayTwo: its image tarball and chart in _out/daytwo-from/.
	@echo ">> building the previous release $(DAYTWO_FROM) into $(DAYTWO_DIR)"
	@rev=$$(git rev-parse --verify '$(DAYTWO_FROM)^{commit}'); \
	  if [ "$$(cat $(DAYTWO_DIR)/src/.daytwo-commit 2>/dev/null)" != "$$rev" ]; then \
	    rm -rf $(DAYTWO_DIR)/src && mkdir -p $(DAYTWO_DIR)/src && \
	    git archive "$$rev" | tar -x -C $(DAYTWO_DIR)/src && echo "$$rev" > $(DAYTWO_DIR)/src/.daytwo-commit; fi; \
	  cd $(DAYTWO_DIR)/src && $(LAB_GO_BUILD) -ldflags "-s -w -X $(VERSION_PKG).Version=v0.0.0-dev+$${rev:0:7} -X $(VERSION_PKG).Revision=$$rev" \
	    -o $(DAYTWO_DIR)/metalgate ./cmd/metalgate
	@$(LAB_GO_BUILD) -o $(BIN)/image-builder ./hack/image
	@$(BIN)/image-builder -binary $(DAYTWO_DIR)/metalgate -path /metalgate -tag $(DAYTWO_IMAGE_REF) -o $(DAYTWO_DIR)/metalgate.tar

.PHONY: test-daytwo
test-daytwo: ## As root on Linux: TestDayTwo in a throwaway lab: helm install of DAYTWO_FROM, upgrade to this tree, rollouts, API freeze, link loss under load; RESULT day2_failed_requests=… .
	@if [ "$$(id -u)" != 0 ] || [ "$$(uname -s)" != Linux ]; then \
	  echo "SKIPPED day-two: the lab needs root on Linux (network namespaces); CI runs it as root"; exit 0; fi; \
	rc=0; $(MAKE) --no-print-directory lab-up $(TEST_DAYTWO_LAB) && \
	  $(MAKE) --no-print-directory daytwo-run $(TEST_DAYTWO_LAB) || rc=$$?; \
	$(MAKE) --no-print-directory lab-down $(TEST_DAYTWO_LAB) || { [ $$rc != 0 ] || rc=1; }; exit $$rc

.PHONY: daytwo-run
daytwo-run: daytwo-from $(HELM) ## TestDayTwo against the running lab LAB_PREFIX, without the operator deployed (the test installs it; it removes metalgate's CRDs when done).
	@rc=0; DAYTWO_FROM_CHART=$(DAYTWO_DIR)/src/charts/metalgate DAYTWO_FROM_IMAGE=$(DAYTWO_DIR)/metalgate.tar \
	  DAYTWO_FROM_REF=$(DAYTWO_IMAGE_REF) DAYTWO_FROM_COMMIT=$(DAYTWO_FROM) \
	  go test -tags 'e2e daytwo' -count=1 -v -timeout 30m -run '^TestDayTwo$$' ./e2e/ || rc=$$?; \
	  if [ $$rc != 0 ]; then echo ">> day-two FAILED; logs of the failed test are in $(E2E_LOGS)/"; fi; exit $$rc

# make test runs its lanes one after the other and stops at the first failure: the checks lane
# (lint, generated files: a few minutes) first, so that a format, vet or stale-file failure is
# known before the API-server, lab and conformance runs start. The unit tests are not run on
# their own there: the integration run (go test -race ./...) runs every one of them, with the
# race detector; a separate -short run first compiled and linked every test binary a second
# time (without -race) and ran the same tests again (that lane took 266 s of a warm run; the
# checks lane alone takes 11-14 s warm). make test-fast keeps them for quick loops. Each step is its own make, in order, whatever -j says.
.PHONY: test-checks
test-checks: ## The checks lane of make test: lint, then generated files up to date.
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory verify-generate

.PHONY: test-fast
test-fast: ## Quick loops: lint, generated files up to date, unit tests (-short), in that order.
	@$(MAKE) --no-print-directory test-checks
	@$(MAKE) --no-print-directory test-unit

# The slow lane runs the e2e suite, whose lab waits most of the time (TestArbitration's and
# TestDemo's watches), then the conformance suite in a lab of its own, beside the integration run,
# which keeps the cores busy (the e2e suite ends first: 866 s against 966 s in a warm run, so the
# conformance suite overlaps the end of the integration run instead of following it); the
# day-two test, whose RESULT measures gaps while pods roll, runs after them, alone (one run
# beside the integration run, on a machine shared with other work, measured a largest gap of
# 0.43 s, against 0.1-0.2 s alone). hack/phases.sh runs them: each line a step prints is prefixed with its name and kept in
# _out/phases/<step>.log; a stream stops at its first failure while the other goes on; every lab
# is taken down by its own step; the lane fails when any step failed. What the steps build in
# common (Kubernetes binaries, the images, the lab driver, the previous release for day two,
# helm) is built first, once, so that no two steps write the same file.
.PHONY: test-slow-prereqs
test-slow-prereqs: test-deps
	@if [ "$$(id -u)" = 0 ] && [ "$$(uname -s)" = Linux ]; then \
	  $(MAKE) --no-print-directory lab-kube-bin lab-images lab-tool daytwo-from; fi

.PHONY: test-slow
test-slow: ## What follows the checks lane: e2e then Gateway API conformance (as root: labs), beside integration (real API server; as root netns + FRR); then day two, alone.
	@$(MAKE) --no-print-directory test-slow-prereqs
	@hack/phases.sh 'test-e2e test-conformance' 'test-integration' -- 'test-daytwo'

.PHONY: test
test: ## Everything: test-checks (lint, generated files; stops at the first failure), then test-slow (e2e then conformance beside integration, which runs every unit test too; then day two).
	@$(MAKE) --no-print-directory test-checks
	@$(MAKE) --no-print-directory test-slow

# ---- the Helm chart (charts/metalgate; tested by config/chart_test.go in make test) -----------
.PHONY: chart-lint
chart-lint: $(HELM) ## helm lint --strict charts/metalgate, with its defaults and each charts/metalgate/ci/*-values.yaml.
	$(HELM) lint --strict charts/metalgate
	@for f in charts/metalgate/ci/*-values.yaml; do echo "$(HELM) lint --strict charts/metalgate -f $$f"; \
	  $(HELM) lint --strict charts/metalgate -f $$f; done

.PHONY: chart-package
chart-package: $(HELM) ## Package the chart at this checkout's version: _out/charts/metalgate-$(CHART_VERSION).tgz (appVersion, the default image tag, $(IMAGE_TAG)).
	$(HELM) package charts/metalgate --version $(CHART_VERSION) --app-version $(IMAGE_TAG) -d $(ROOT)/_out/charts

.PHONY: release
release: $(HELM) ## Build a release into _out/release/ (make release VERSION=x.y.z): OCI image for linux/amd64+arm64, chart, kubectl plugin archives, krew manifest, SBOM, SHA256SUMS (docs/release.md).
	@case "$(VERSION)" in *dirty*|*-dev*) echo "release: VERSION=$(VERSION) is not a release version: make release VERSION=x.y.z"; exit 1;; esac
	go run ./hack/release -version $(VERSION) -revision $(REVISION) -helm $(HELM) -out $(ROOT)/_out/release

# ---- benchmarks -----------------------------------------------------------------------------
.PHONY: bench
bench: ## Allocator benchmarks: table, then RESULT alloc_last1k_over_first1k=<ratio>.
	hack/bench-alloc.sh

# make stress-alloc: rival controllers (leader election off) over churning Services, checked at
# every status change; the race detector on. STRESS_DURATION (10m), STRESS_RIVALS (3),
# STRESS_HOG (2 CPU-burning goroutines), STRESS_SEED (0: from the clock).
STRESS_DURATION ?= 10m
STRESS_RIVALS ?= 3
STRESS_HOG ?= 2
STRESS_SEED ?= 0

.PHONY: stress-alloc
stress-alloc: kube-bin ## Rival controllers over churning Services and kills under CPU load; invariant 1 checked at every status change; RESULT double_assignments=… services=… rivals=… kills=….
	@rm -rf _out/stress-alloc && mkdir -p _out/stress-alloc
	@echo ">> TestStressRivals for $(STRESS_DURATION) with $(STRESS_RIVALS) rivals (log: _out/stress-alloc.log; each rival's: _out/stress-alloc/)"
	go test -count=1 -race -timeout 0 -v -run '^TestStressRivals$$' ./controllers/ \
	  -args -stress.duration=$(STRESS_DURATION) -stress.rivals=$(STRESS_RIVALS) -stress.hog=$(STRESS_HOG) -stress.seed=$(STRESS_SEED) \
	  -stress.logdir=$(CURDIR)/_out/stress-alloc \
	  > _out/stress-alloc.log 2>&1 || { tail -100 _out/stress-alloc.log; exit 1; }
	@grep -E '^stress:' _out/stress-alloc.log
	@grep -E '^RESULT ' _out/stress-alloc.log | tail -1

.PHONY: bench-alloc-api
bench-alloc-api: kube-bin build ## Allocation through a real kube-apiserver: 300 and 3,000 pending Services, then 3,000 created live; uniqueness checked; RESULT alloc_services_per_s=… . BENCH_ALLOC_ARGS: more flags.
	go run ./e2e/cmd/benchalloc -controller $(BIN)/metalgate $(BENCH_ALLOC_ARGS)

.PHONY: bench-scale
bench-scale: kube-bin ## Scale (root): 10,000 LB Services + 10,000 Ingresses + 100,000 endpoints; controller/speaker/proxy RSS, proxy start → ready, endpoint change → routed p99; RESULT controller_rss_mib=… . SERVICES=1000: a quick run.
	hack/bench-scale.sh

.PHONY: bench-failover
bench-failover: ## Layer-2 failover (root): SIGKILL the owner, time until the client sees the new MAC; RESULT l2_failover_median_ms_v4=… _v6=….
	speaker/bench/bench-failover.sh

.PHONY: bench-bgp
bench-bgp: ## BGP withdraw time against FRR (root): frozen speaker / cut link, BFD vs hold timer; RESULT bgp_withdraw_median_ms_bfd=… .
	speaker/bgp/bench/bench-bgp.sh

.PHONY: bench-fairness
bench-fairness: ## Tenant fairness (no root, loopback, about 85 s after the build): a victim namespace's p99 and success, quiet and while another namespace floods (slow backend, bcrypt-12 wrong passwords, connections); RESULT fairness_victim_p99_ratio=… fairness_victim_success=… . BENCH_FAIRNESS_ARGS: more flags.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/metalgate ./cmd/metalgate
	go run ./e2e/cmd/benchfairness -metalgate $(BIN)/metalgate $(BENCH_FAIRNESS_ARGS)

.PHONY: bench-proxy
bench-proxy: kube-bin ## Proxy vs nginx vs haproxy vs Caddy: HTTP/1.1, HTTPS (ECDSA, RSA), h2, new TLS connections; endpoint-update latency, 10k-Ingress memory; RESULT proxy_rps_ratio_vs_nginx=… . PROFILE=1: perf profiles.
	hack/bench-proxy.sh

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 30s).
	hack/fuzz.sh $${FUZZTIME:-30s}

.PHONY: mutations
mutations: ## Revert each proxy hardening fix in a scratch worktree: the test that pins it must fail.
	hack/mutations.py

.PHONY: clean
clean: ## Remove build outputs (keeps cached tools and Kubernetes binaries).
	rm -f $(BIN)/metalgate

# ---- the lab: a real three-node cluster in network namespaces (see e2e/README.md) ----------
include e2e/lab.mk

# ---- make demo, make image, make cluster (kind) ------------------------------------------------
include e2e/demo.mk
