# embedops: kubebuilder's target names, plus tools, verify and dev.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
GO_TEST_FLAGS ?= -count=1 -timeout=45m

CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint

# Test binaries, each built from its module under test/tools/<set>.
KUBE_TOOLS := kube-apiserver kube-controller-manager kube-scheduler kubectl
KWOK_TOOLS := kwok kwokctl
FLUX_TOOLS := source-controller kustomize-controller
# helm-controller has its own module (test/tools/helm): test/gitops installs
# charts/embedops with it.
HELM_TOOLS := helm-controller
# The real node's binaries (test/harness node.go): kubelet and kube-proxy from
# the kube module, CoreDNS (cluster DNS) from test/tools/coredns.
NODE_KUBE_TOOLS := kubelet kube-proxy
NODE_TOOLS := $(NODE_KUBE_TOOLS) coredns
# Argo CD (test/tools/argocd): one multi-call binary that picks its component
# from the name it runs under (cmd/main.go), so the components are symlinks.
ARGOCD_VERSION := v2.14.21
ARGOCD_COMPONENTS := argocd-repo-server argocd-application-controller
# The executables its repo-server runs to render Helm charts and
# kustomizations, in a directory of their own that only the repo-server has
# on its PATH (test/harness).
ARGOCD_RENDER_TOOLS := argocd-render/helm argocd-render/kustomize
ARGOCD_TOOLS := argocd $(ARGOCD_COMPONENTS) $(ARGOCD_RENDER_TOOLS)
# The CSI snapshot controller (test/tools/snapshotter): the real one, from
# kubernetes-csi/external-snapshotter, which the local cluster and the real
# node run (test/harness snapshots.go); the harness's provisioners play the
# CSI driver and its csi-snapshotter sidecar.
SNAPSHOT_TOOLS := snapshot-controller
TOOLS := $(KUBE_TOOLS) floor/kube-apiserver etcd $(KWOK_TOOLS) $(FLUX_TOOLS) $(HELM_TOOLS) $(NODE_TOOLS) $(ARGOCD_TOOLS) $(SNAPSHOT_TOOLS) controller-gen golangci-lint
# Third-party CRDs the tests install: Flux's from the Flux tools module;
# Argo CD's twice. crds/argocd-run holds the CRDs of the Argo CD that runs
# (v2.14.21, test/tools/argocd), for the tests that run it; crds/argocd holds
# v3's, for the provenance tests that only read Applications a user's Argo CD
# writes (sources, multi-source, status.sync.revisions): the operator must
# read v3's schema too, and v3 does not build here to run. crds/snapshot
# holds the CSI snapshot CRDs (snapshot.storage.k8s.io/v1) of the snapshot
# controller's release.
ARGOCD_MODULE := github.com/argoproj/argo-cd/v3@v3.5.0
CRDS := crds/flux crds/helm crds/argocd crds/argocd-run crds/snapshot
COLD_BUILD_NOTE := with an empty Go build cache, all tools take about an hour on 2 cores

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-z0-9-]+:.*##/ {printf "  %-14s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from markers, and copy them (and the alerts) into charts/embedops.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./internal/... output:rbac:artifacts:config=config/rbac
	go test ./test/chart -run '^TestGeneratedFiles$$' -count=1 -update

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy methods.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: fmt
fmt: $(GOLANGCI_LINT) ## Run gofmt and goimports (local imports grouped last).
	$(GOLANGCI_LINT) fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

.PHONY: verify
verify: manifests generate fmt ## Fail when generation or formatting changes the tree.
	@$(MAKE) --no-print-directory verify-tree

.PHONY: verify-tree
verify-tree:
	@if [ -n "$$(git status --porcelain)" ]; then \
		echo "verify: the tree changed after generation:"; git status --porcelain; git --no-pager diff --stat; exit 1; \
	fi
	@echo "verify: generated files and formatting are up to date"

.PHONY: test
test: tools manifests generate fmt vet lint ## Build missing tools, then run every test (with CI set, also verify the tree).
ifdef CI
	@$(MAKE) --no-print-directory verify-tree
endif
	go test $(GO_TEST_FLAGS) ./...
	cd test/tools/dashboard && GOFLAGS=-mod=readonly go test $(GO_TEST_FLAGS) .
	@$(MAKE) --no-print-directory test-floor

# The envtest suites that also run against the oldest supported Kubernetes
# (internal/kubeversion.Floor), bin/floor/kube-apiserver: the CRDs' admission
# (CEL, defaults), the controller's and the version check's; the others run
# against bin/kube-apiserver only.
FLOOR_TEST_PACKAGES := ./api/v1alpha1/ ./internal/controller/ ./internal/kubeversion/

.PHONY: test-floor
test-floor: $(BIN)/floor/kube-apiserver $(BIN)/etcd ## Run the CRD admission, controller and version-check suites against the oldest supported kube-apiserver (bin/floor).
	EMBEDOPS_KUBE_APISERVER=$(BIN)/floor/kube-apiserver go test $(GO_TEST_FLAGS) $(FLOOR_TEST_PACKAGES)

.PHONY: test-e2e
test-e2e: tools manifests ## Run the end-to-end tests: the operator on the local cluster, and GitOps with real Flux and Argo CD.
	go test $(GO_TEST_FLAGS) ./test/e2e/... ./test/gitops/... ./test/argocd/...

CHAOS_CYCLES ?= 50
.PHONY: test-chaos
test-chaos: tools manifests ## Run the fault tests with CHAOS_CYCLES controller kills (the test command runs them with the default).
	go test $(GO_TEST_FLAGS) -v -run . ./test/chaos/... -args -chaos.cycles=$(CHAOS_CYCLES)

BENCH_FLAGS ?=
.PHONY: dashboard-png
dashboard-png: $(addprefix $(BIN)/,$(KUBE_TOOLS) etcd $(KWOK_TOOLS)) manifests ## Draw docs/grafana-dashboard.png: config/grafana's dashboard over two minutes of the local cluster's metrics.
	cd test/tools/dashboard && GOFLAGS=-mod=readonly go run . -dashboard $(CURDIR)/config/grafana/embedops.json -o $(CURDIR)/docs/grafana-dashboard.png

.PHONY: bench
bench: tools manifests ## Measure scale and cost on the local cluster and print a table (BENCH_FLAGS="--servers 50 -o json").
	go run ./test/bench/cmd/bench $(BENCH_FLAGS)

# The real node's seed benchmark (test/node, BenchmarkScaleUpFillsNewReplicas):
# on its own, so that no test shares the node's cores with what it times; as
# root, with the node's Debian packages (else it skips and says why).
# NODE_BENCH_FLAGS="-seed.weights-mib=160 -seed.hub-mib-per-second=16" sets
# the model's size and the hub's rate.
NODE_BENCH_FLAGS ?=
NODE_BENCH_TOOLS := $(addprefix $(BIN)/,etcd kube-apiserver kube-controller-manager kube-scheduler $(NODE_TOOLS) $(SNAPSHOT_TOOLS) crds/snapshot)
.PHONY: bench-node
bench-node: node-packages $(NODE_BENCH_TOOLS) manifests ## Measure on the real node how new replicas get the model with each cache seed (clone, snapshot, download): seconds to Ready and hub bytes, as a table.
	go test ./test/node -run '^$$' -bench '^BenchmarkScaleUpFillsNewReplicas$$' -benchtime 1x -count=1 -timeout 40m -args $(NODE_BENCH_FLAGS)

##@ Try it

# DEV_FLAGS=-node=kwok simulates pods even where a real node could run;
# -gitops=argocd runs Argo CD instead of Flux.
DEV_FLAGS ?=
# make dev's program (test/dev) and what it runs from ./bin; as root, where
# it runs a real node, also the node's binaries (the kubelet's cold build
# takes about 6 minutes); with -gitops=argocd, Argo CD and redis-server
# instead of Flux (Argo CD's cold build takes about 8 minutes).
DEV := $(BIN)/embedops-dev
DEV_ARGOCD := $(findstring -gitops=argocd,$(DEV_FLAGS))
DEV_TOOLS := $(addprefix $(BIN)/,$(KUBE_TOOLS) etcd $(KWOK_TOOLS) $(SNAPSHOT_TOOLS) crds/snapshot \
	$(if $(DEV_ARGOCD),$(ARGOCD_TOOLS) crds/argocd-run,$(FLUX_TOOLS) crds/flux) \
	$(if $(filter 0,$(shell id -u)),$(NODE_TOOLS)))

.PHONY: dev
dev: ## Git, Flux (DEV_FLAGS=-gitops=argocd: Argo CD), the operator and the audit on a real node where the machine can run pods (root, cgroups), else on kwok; builds what it needs first.
	@began=$$(date +%s); $(MAKE) --no-print-directory dev-bin; \
		echo "dev: ./bin is ready after $$(( $$(date +%s) - began ))s"
	$(DEV) up $(DEV_FLAGS)

.PHONY: dev-bin
dev-bin: $(DEV_TOOLS) $(if $(DEV_ARGOCD),argocd-packages) manifests build
	CGO_ENABLED=0 go build -o $(DEV) ./test/dev

.PHONY: dev-change
dev-change: ## Commit a new storage class for the minimal example's cache to make dev's repository and follow its bindings.
	@if [ ! -x $(DEV) ]; then echo "dev-change: run make dev first"; exit 1; fi
	$(DEV) change

.PHONY: dev-down
dev-down: ## Stop a running make dev: every process it started, and its temporary state.
	@if [ -x $(DEV) ]; then $(DEV) down; else echo "dev-down: no make dev has been built"; fi

##@ Build

# The CLI's version and commit, stamped into `embedops version`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
CLI_LDFLAGS := -X github.com/embedops/embedops/internal/cli.version=$(VERSION) -X github.com/embedops/embedops/internal/cli.commit=$(COMMIT)

.PHONY: build
build: ## Build the controller and the CLI into ./bin, the CLI also as the kubectl plugin kubectl-embedops.
	CGO_ENABLED=0 go build -o $(BIN)/controller ./cmd/controller
	CGO_ENABLED=0 go build -ldflags "$(CLI_LDFLAGS)" -o $(BIN)/embedops ./cmd/embedops
	ln -f $(BIN)/embedops $(BIN)/kubectl-embedops
	@# kubectl (1.26+) completes a plugin's arguments with kubectl_complete-<plugin> on PATH.
	printf '#!/bin/sh\nexec kubectl-embedops __complete "$$@"\n' > $(BIN)/kubectl_complete-embedops
	chmod +x $(BIN)/kubectl_complete-embedops

KREW_URI_BASE ?=
.PHONY: krew
krew: ## Package the CLI as the krew plugin embedops: archives for linux and darwin (amd64, arm64) and bin/krew/embedops.yaml (KREW_URI_BASE= where they will be published).
	go run ./test/krew -o $(BIN)/krew -version $(VERSION) -commit $(COMMIT) -uri-base "$(KREW_URI_BASE)"

IMAGE_DIR ?= $(BIN)/image
IMAGE_REF ?= embedops-controller:latest
.PHONY: image
image: ## Build the controller image (controller and embedops, non-root, empty base) as an OCI image layout in bin/image, without a container runtime.
	cd test/tools/image && GOFLAGS=-mod=readonly go run . -repo $(CURDIR) -o $(abspath $(IMAGE_DIR)) -ref $(IMAGE_REF)

# The real node's images (test/harness NodeImages), which `go test
# ./test/node/` builds for itself: the controller (also the populator), the
# hub and TEI stand-ins under the names config/ and the examples use, and
# the sandbox image, each a docker-archive for `ctr images import`.
IMAGES_DIR ?= $(BIN)/images
.PHONY: images
images: ## Build the real node's images (controller, hub and TEI stand-ins, pause) as docker-archive tarballs in bin/images, without a container runtime.
	go run ./test/harness/images -o $(abspath $(IMAGES_DIR))

.PHONY: run
run: manifests ## Run the controller against the current kubeconfig.
	go run ./cmd/controller

##@ Tools

# The previous release's controller, which test/upgrade upgrades from:
# cmd/controller of the commit test/upgrade/BASELINE names, built from the
# git history (a full clone) into bin/upgrade/controller-<commit>, so a new
# baseline is a new file. The test builds it too when it is missing.
UPGRADE_BASELINE := $(shell sed -n '/^[0-9a-f]\{40\}$$/p' test/upgrade/BASELINE)
UPGRADE_CONTROLLER := $(BIN)/upgrade/controller-$(UPGRADE_BASELINE)

.PHONY: tools
tools: check-git node-packages argocd-packages $(addprefix $(BIN)/,$(TOOLS) $(CRDS)) $(UPGRADE_CONTROLLER) ## Build the missing test binaries into ./bin; install the real node's Debian packages when missing.

$(UPGRADE_CONTROLLER):
	go run ./test/upgrade/baseline

# The audit's clone tests run git-upload-pack (go-git's file transport looks
# on PATH, then in `git --exec-path`); it comes with git, not a Go module.
.PHONY: check-git
check-git:
	@command -v git-upload-pack >/dev/null || [ -x "$$(git --exec-path 2>/dev/null)/git-upload-pack" ] || \
		{ echo "tools: git-upload-pack is missing: install git (Debian: apt-get install git); the audit's clone tests run it"; exit 1; }

# build-tool builds the main packages $(2) of test/tools/$(1), with the -X
# flags $(3), into $(4): a file for one package, a directory ending in / for
# several, each named after its package. Several in one go build compile
# what they share once, and link one while compiling the next. -s -w leaves
# out the symbol table and DWARF, which nothing here reads (stack traces
# come from pclntab): kube-apiserver links in 13 s instead of 17-20.
define build-tool
	@echo "tools: building $(2) from test/tools/$(1) ($(COLD_BUILD_NOTE))"
	@mkdir -p $(dir $(4))
	cd test/tools/$(1) && GOFLAGS=-mod=readonly go build -ldflags '-s -w $(3)' -o $(4) $(2)
endef

# Kubernetes' binaries are stamped with their k8s.io/kubernetes version from
# test/tools/<set>/go.mod, as Kubernetes' release build (hack/lib/version.sh)
# stamps them, so that /version and --version say it rather than an unstamped
# build's v0.0.0-master: Helm checks charts/embedops' kubeVersion against it,
# and the controller's version check (internal/kubeversion) compares it.
kube-version = $(shell sed -n 's/^[[:space:]]*k8s\.io\/kubernetes \(v[0-9][0-9.]*\).*/\1/p' test/tools/$(1)/go.mod)
kube-version-parts = $(subst ., ,$(patsubst v%,%,$(1)))
kube-xflags = $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,$(addprefix -X $(pkg).,gitVersion=$(1) \
	gitMajor=$(word 1,$(call kube-version-parts,$(1))) gitMinor=$(word 2,$(call kube-version-parts,$(1)))))
KUBE_VERSION := $(call kube-version,kube)
KUBE_FLOOR_VERSION := $(call kube-version,kube-floor)

# A marker per stamped version: binaries built before they were stamped are
# older than it, so make rebuilds them once.
$(BIN)/stamps/%:
	@mkdir -p $(@D) && touch $@

# The control plane's binaries and the real node's kubelet and kube-proxy,
# from one module set (k8s.io/kubernetes v1.37.2, staging modules at
# v0.37.2), in one go build.
$(addprefix $(BIN)/,$(KUBE_TOOLS) $(NODE_KUBE_TOOLS)) &: test/tools/kube/go.mod test/tools/kube/go.sum $(BIN)/stamps/kube-$(KUBE_VERSION)
	$(call build-tool,kube,$(addprefix k8s.io/kubernetes/cmd/,$(KUBE_TOOLS) $(NODE_KUBE_TOOLS)),$(call kube-xflags,$(KUBE_VERSION)),$(BIN)/)

# The oldest supported Kubernetes (internal/kubeversion.Floor): its
# kube-apiserver from test/tools/kube-floor into bin/floor, for test-floor.
$(BIN)/floor/kube-apiserver: test/tools/kube-floor/go.mod test/tools/kube-floor/go.sum
	$(call build-tool,kube-floor,k8s.io/kubernetes/cmd/kube-apiserver,$(call kube-xflags,$(KUBE_FLOOR_VERSION)),$@)

# Cluster DNS for the real node: CoreDNS from its own Go module, with only
# the kubernetes, errors, health and ready plugins (test/tools/coredns). A
# real DNS server rather than a stand-in, because the controller's endpoint
# check resolves <service>.<namespace>.svc exactly as pods resolve it; no
# forward plugin, so no query leaves the node.
$(BIN)/coredns: test/tools/coredns/go.mod test/tools/coredns/go.sum test/tools/coredns/main.go
	$(call build-tool,coredns,.,,$@)

# The real node runs the container runtime, the CNI plugins and iptables from
# Debian (REAL-NODE.md: containerd 1.6 with runc 1.1 run pods here; crun does
# not, "cgroups in hybrid mode not supported"). Only missing packages are
# installed, and only as root; otherwise the node tests skip and say why.
NODE_PACKAGES := containerd runc containernetworking-plugins iptables iproute2
CNI_BIN_DIR := /usr/lib/cni
# Each package's check: a command on PATH or a file.
NODE_CHECK_containerd := containerd ctr containerd-shim-runc-v2
NODE_CHECK_runc := runc
NODE_CHECK_containernetworking-plugins := $(addprefix $(CNI_BIN_DIR)/,bridge host-local loopback portmap)
NODE_CHECK_iptables := iptables iptables-restore
NODE_CHECK_iproute2 := ip

.PHONY: node-packages
node-packages:
	@present() { case $$1 in /*) [ -x "$$1" ];; *) command -v "$$1" >/dev/null;; esac; }; \
	missing=""; \
	$(foreach pkg,$(NODE_PACKAGES),for check in $(NODE_CHECK_$(pkg)); do present $$check || { missing="$$missing $(pkg)"; break; }; done;) \
	if [ -z "$$missing" ]; then echo "tools: the real node's Debian packages are installed ($(NODE_PACKAGES))"; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "tools: the real node needs the Debian packages$$missing (apt-get install as root); its tests will skip"; \
	else \
		echo "tools: installing the real node's Debian packages:$$missing (about 30s)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
		dpkg-query -W -f='tools: installed $${Package} $${Version}\n' $$missing; \
	fi

# Argo CD's cache: its manifests run redis beside the repo-server and the
# application-controller, and so does test/harness (StartArgoCD), with
# Debian's redis-server, installed when missing and root.
.PHONY: argocd-packages
argocd-packages:
	@if command -v redis-server >/dev/null; then echo "tools: redis-server is installed (Argo CD's cache)"; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "tools: the Argo CD tests need redis-server (apt-get install redis-server as root)"; \
	else \
		echo "tools: installing redis-server (Argo CD's cache)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server; \
		dpkg-query -W -f='tools: installed $${Package} $${Version}\n' redis-server; \
	fi

$(BIN)/etcd: test/tools/etcd/go.mod test/tools/etcd/go.sum
	$(call build-tool,etcd,go.etcd.io/etcd/server/v3,,$@)

$(addprefix $(BIN)/,$(KWOK_TOOLS)) &: test/tools/kwok/go.mod test/tools/kwok/go.sum
	$(call build-tool,kwok,$(addprefix sigs.k8s.io/kwok/cmd/,$(KWOK_TOOLS)),,$(BIN)/)

$(addprefix $(BIN)/,$(FLUX_TOOLS)) &: test/tools/flux/go.mod test/tools/flux/go.sum
	$(call build-tool,flux,$(addprefix github.com/fluxcd/,$(FLUX_TOOLS)),,$(BIN)/)

$(BIN)/helm-controller: test/tools/helm/go.mod test/tools/helm/go.sum
	$(call build-tool,helm,github.com/fluxcd/helm-controller,,$@)

# Argo CD's version is stamped as its release build stamps it (argo-cd
# Makefile: -X common.version=$(cat VERSION), without the v), so that its
# components report it.
$(BIN)/argocd: test/tools/argocd/go.mod test/tools/argocd/go.sum $(BIN)/stamps/argocd-$(ARGOCD_VERSION)
	$(call build-tool,argocd,github.com/argoproj/argo-cd/v2/cmd,-X github.com/argoproj/argo-cd/v2/common.version=$(patsubst v%,%,$(ARGOCD_VERSION)),$@)

$(addprefix $(BIN)/,$(ARGOCD_COMPONENTS)): $(BIN)/argocd
	ln -sf argocd $@

# helm and kustomize in one go build; helm stamped as its release build
# stamps it (helm Makefile, LDFLAGS; the flag names no symbol of kustomize,
# so the linker leaves kustomize as it is).
$(addprefix $(BIN)/,$(ARGOCD_RENDER_TOOLS)) &: test/tools/argocd-render/go.mod test/tools/argocd-render/go.sum
	$(call build-tool,argocd-render,helm.sh/helm/v3/cmd/helm sigs.k8s.io/kustomize/kustomize/v5,-X helm.sh/helm/v3/internal/version.version=v3.16.3,$(BIN)/argocd-render/)

# snapshot-controller stamped as external-snapshotter's release build stamps
# it (release-tools/build.make: -X main.version=$(REV)), with the version
# test/tools/snapshotter/go.mod pins.
SNAPSHOTTER_MODULE := github.com/kubernetes-csi/external-snapshotter/v8
SNAPSHOTTER_CLIENT_MODULE := github.com/kubernetes-csi/external-snapshotter/client/v8
SNAPSHOTTER_VERSION := $(shell sed -n 's/^[[:space:]]*github\.com\/kubernetes-csi\/external-snapshotter\/v8 \(v[0-9][0-9.]*\).*/\1/p' test/tools/snapshotter/go.mod)

$(BIN)/snapshot-controller: test/tools/snapshotter/go.mod test/tools/snapshotter/go.sum $(BIN)/stamps/snapshotter-$(SNAPSHOTTER_VERSION)
	$(call build-tool,snapshotter,$(SNAPSHOTTER_MODULE)/cmd/snapshot-controller,-X main.version=$(SNAPSHOTTER_VERSION),$@)

$(CONTROLLER_GEN): test/tools/codegen/go.mod test/tools/codegen/go.sum
	$(call build-tool,codegen,sigs.k8s.io/controller-tools/cmd/controller-gen,,$@)

$(GOLANGCI_LINT): test/tools/lint/go.mod test/tools/lint/go.sum
	$(call build-tool,lint,github.com/golangci/golangci-lint/v2/cmd/golangci-lint,,$@)

# The CRD directories are written beside the target and moved into place; a
# stale one (a fresh checkout's go.mod is newer than a cached bin/) is
# replaced, not moved into.
$(BIN)/crds/flux: test/tools/flux/go.mod
	@mkdir -p $@.tmp
	for module in github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller; do \
		dir=$$(cd test/tools/flux && go mod download $$module && go list -m -f '{{.Dir}}' $$module); \
		install -m 0644 $$dir/config/crd/bases/*.yaml $@.tmp/; \
	done
	rm -rf $@ && mv $@.tmp $@

$(BIN)/crds/helm: test/tools/helm/go.mod
	@mkdir -p $@.tmp
	dir=$$(cd test/tools/helm && go mod download github.com/fluxcd/helm-controller && go list -m -f '{{.Dir}}' github.com/fluxcd/helm-controller); \
		install -m 0644 $$dir/config/crd/bases/*.yaml $@.tmp/
	rm -rf $@ && mv $@.tmp $@

$(BIN)/crds/argocd:
	@mkdir -p $@.tmp
	dir=$$(go mod download -json $(ARGOCD_MODULE) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
		install -m 0644 $$dir/manifests/crds/*-crd.yaml $@.tmp/
	rm -rf $@ && mv $@.tmp $@

$(BIN)/crds/argocd-run: test/tools/argocd/go.mod
	@mkdir -p $@.tmp
	dir=$$(cd test/tools/argocd && go mod download github.com/argoproj/argo-cd/v2 && go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v2); \
		install -m 0644 $$dir/manifests/crds/*-crd.yaml $@.tmp/
	rm -rf $@ && mv $@.tmp $@

# The snapshot CRDs are in the client module (external-snapshotter's
# client/config/crd), not in the module that builds snapshot-controller; the
# group snapshot CRDs beside them are left out (the harness runs the
# controller with CSIVolumeGroupSnapshot off).
$(BIN)/crds/snapshot: test/tools/snapshotter/go.mod
	@mkdir -p $@.tmp
	dir=$$(cd test/tools/snapshotter && go mod download $(SNAPSHOTTER_CLIENT_MODULE) && go list -m -f '{{.Dir}}' $(SNAPSHOTTER_CLIENT_MODULE)); \
		install -m 0644 $$dir/config/crd/snapshot.storage.k8s.io_volumesnapshot{classes,contents,s}.yaml $@.tmp/
	rm -rf $@ && mv $@.tmp $@

.PHONY: clean-tools
clean-tools: ## Remove the built test binaries.
	rm -rf $(BIN)
