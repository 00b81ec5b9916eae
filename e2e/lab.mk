# e2e/lab.mk — the hermetic lab and the end-to-end tests (see e2e/README.md).
# Included by the top-level Makefile (`include e2e/lab.mk`); uses its ROOT, BIN, KUBE_BIN, LDFLAGS.
# Everything runs as root. Two labs coexist when their LAB_PREFIX differ:
#   make lab-up LAB_PREFIX=t2-

LAB_PREFIX ?= mg-
LAB_DIR ?= $(ROOT)/_out/lab-$(LAB_PREFIX)
LAB_IMAGES ?= $(ROOT)/_out/images
LAB_KUBE_BIN ?= $(KUBE_BIN)
export LAB_PREFIX LAB_DIR LAB_IMAGES LAB_KUBE_BIN
ifdef LAB_PORT_BASE
export LAB_PORT_BASE
endif

LAB := $(BIN)/metalgate-lab
LAB_KUBECTL := $(LAB_KUBE_BIN)/kubectl --kubeconfig $(LAB_DIR)/kubeconfig
LAB_KUBE_COMPONENTS := kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
LAB_GO_BUILD := CGO_ENABLED=0 go build -trimpath
E2E_FLAGS ?= -timeout 30m
E2E_LOGS := $(ROOT)/e2e/_logs

.PHONY: lab-tool
lab-tool: ## Build the lab driver (bin/metalgate-lab).
	@$(LAB_GO_BUILD) -o $(LAB) ./e2e/cmd/lab

.PHONY: lab-deps
lab-deps: lab-tool ## Install the Debian packages the lab needs (only the missing ones, one apt-get).
	@$(LAB) deps

.PHONY: lab-kube-bin
lab-kube-bin: lab-deps ## Build the Kubernetes $(KUBE_VERSION) components the lab runs into ./bin (cached).
	@hack/build-k8s.sh $(LAB_KUBE_BIN) $(LAB_KUBE_COMPONENTS)

# Images: each binary is rebuilt every time (go build is incremental); hack/image rewrites a
# tarball only when its inputs changed, and the lab re-imports only changed tarballs.
.PHONY: lab-images
lab-images: ## Build the pause, metalgate and echo images (tarballs in _out/images).
	@mkdir -p $(LAB_IMAGES)/bin
	@echo ">> building images (metalgate, echo, pause) into $(LAB_IMAGES)"
	@$(LAB_GO_BUILD) -o $(BIN)/image-builder ./hack/image
	@$(LAB_GO_BUILD) -ldflags '$(LDFLAGS)' -o $(BIN)/metalgate ./cmd/metalgate
	@$(LAB_GO_BUILD) -ldflags '-s -w' -o $(LAB_IMAGES)/bin/echo ./e2e/cmd/echo
	@$(LAB_GO_BUILD) -ldflags '-s -w' -o $(LAB_IMAGES)/bin/pause ./e2e/cmd/pause
	@$(BIN)/image-builder -binary $(BIN)/metalgate -path /metalgate -tag ghcr.io/metalgate/metalgate:dev -o $(LAB_IMAGES)/metalgate.tar
	@$(BIN)/image-builder -binary $(LAB_IMAGES)/bin/echo -path /echo -tag ghcr.io/metalgate/echo:dev -o $(LAB_IMAGES)/echo.tar
	@$(BIN)/image-builder -binary $(LAB_IMAGES)/bin/pause -path /pause -ca-bundle '' -tag ghcr.io/metalgate/pause:dev -o $(LAB_IMAGES)/pause.tar

.PHONY: lab-up
lab-up: lab-kube-bin lab-images lab-tool ## Bring the lab up (idempotent; a healthy lab only gets changed images).
	@$(LAB) up

.PHONY: lab-load
lab-load: lab-images lab-tool ## Rebuild the images and import changed ones into the running lab (restarts their pods).
	@$(LAB) load

.PHONY: lab-down
lab-down: lab-tool ## Remove every trace of the lab (processes, mounts, namespaces, cgroups, links; restores sysctls).
	@$(LAB) down

.PHONY: lab-status
lab-status: lab-tool ## Show the lab's daemons, nodes and BGP sessions.
	@$(LAB) status

.PHONY: lab-selftest
lab-selftest: lab-up ## Prove the lab: nodes, Services, hostNetwork + ARP, FRR BGP, ARP/NDP from the client.
	@rc=0; go test -tags e2e -count=1 -v $(E2E_FLAGS) -run '^TestLab' ./e2e/ || rc=$$?; \
	  if [ $$rc != 0 ]; then echo ">> lab-selftest FAILED; logs of the failed tests are in $(E2E_LOGS)/"; fi; exit $$rc

.PHONY: e2e-deploy
e2e-deploy: lab-up ## Deploy the operator into the lab (config/lab overlay) and wait for it.
	@echo ">> kubectl apply -k config/lab"
	@$(LAB_KUBECTL) apply -k config/lab
	@$(LAB_KUBECTL) -n metalgate-system rollout status deployment/metalgate-controller --timeout=180s
	@$(LAB_KUBECTL) -n metalgate-system wait --for=condition=Available deployment/metalgate-controller --timeout=60s

.PHONY: e2e
e2e: e2e-deploy ## Lab up, operator deployed, then every end-to-end test (logs of failures in e2e/_logs/).
	@rc=0; go test -tags e2e -count=1 -v $(E2E_FLAGS) ./e2e/... || rc=$$?; \
	  if [ $$rc != 0 ]; then echo ">> e2e FAILED; logs of the failed tests are in $(E2E_LOGS)/"; fi; exit $$rc

# N × (lab-up, lab-selftest, lab-down) in a row: a failure that happens once in a few dozen
# lab-ups shows up as a number. The prerequisites (Kubernetes binaries, images, the lab driver,
# the e2e test packages) are built once, before the first run, and a lab left up is taken down
# first, so every lab-up builds a lab. Prints a table of step times and failures and ends with
# `RESULT lab_soak_runs=N lab_soak_failures=F slowest_step=… slowest_s=…`; the output of every
# step is in $(LAB_SOAK_LOGS), with the lab's and the tests' logs next to a failed step.
N ?= 10
LAB_SOAK_LOGS ?= $(ROOT)/_out/lab-soak-$(LAB_PREFIX)

.PHONY: lab-soak
lab-soak: lab-kube-bin lab-images lab-tool ## N x (lab-up, lab-selftest, lab-down): failures and the slowest step (make lab-soak N=20).
	@go test -tags e2e -count=1 -run '^$$' ./e2e/ >/dev/null
	@$(LAB) down
	@$(LAB) soak -runs $(N) -logs $(LAB_SOAK_LOGS) -keep $(LAB_DIR)/logs -keep $(E2E_LOGS) \
	  -step 'lab-up=$(LAB) up' \
	  -step "lab-selftest=go test -tags e2e -count=1 -v $(E2E_FLAGS) -run '^TestLab' ./e2e/" \
	  -finally 'lab-down=$(LAB) down'
