# Everything a developer or CI runs. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
MODULE := github.com/fleetgo/fleet

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X $(MODULE)/internal/version.Version=$(VERSION) \
	-X $(MODULE)/internal/version.GitCommit=$(COMMIT) \
	-X $(MODULE)/internal/version.BuildDate=$(BUILD_DATE)

# The image's binaries carry the commit's time as build date, so a commit gives one digest.
IMAGE_CREATED ?= $(shell git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
IMAGE_LDFLAGS := -s -w -X $(MODULE)/internal/version.Version=$(VERSION) \
	-X $(MODULE)/internal/version.GitCommit=$(COMMIT) \
	-X $(MODULE)/internal/version.BuildDate=$(IMAGE_CREATED)
IMAGE_ARGS = -binaries amd64=bin/linux-amd64/fleet,arm64=bin/linux-arm64/fleet -version $(VERSION) \
	-revision $(COMMIT) -created $(IMAGE_CREATED) -out bin/image

# Charts: a tag vX.Y.Z (or vX.Y.Z-rc.N) gives chart version X.Y.Z; any other build 0.0.0+dev.<describe>,
# build metadata rather than a prerelease, so `helm install` finds it without --devel. The
# appVersion is the image tag, which the charts' templates use when image.tag is empty.
CHART_VERSION ?= $(shell v=$$(echo '$(VERSION)' | sed 's/^v//'); \
	if [[ $$v =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$$ ]]; then echo $$v; else echo 0.0.0+dev.$$v; fi)
CHARTS := fleet-crd fleet fleet-agent
# Where the Helm repository (index.yaml) will be served from; empty writes relative URLs.
CHART_REPO_URL ?=
HELM_VERSION = $(shell $(GO) list -m -f '{{.Version}}' helm.sh/helm/v3)
HELM := $(CURDIR)/dev/bin/helm
# The real-node tier: containerd with its runc shim, the CNI plugins and the pause program.
NODE_PKGS := github.com/containerd/containerd/v2/cmd/containerd \
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 ./pause
CNI_PKGS := github.com/containernetworking/plugins/plugins/main/bridge \
	github.com/containernetworking/plugins/plugins/main/loopback \
	github.com/containernetworking/plugins/plugins/ipam/host-local \
	github.com/containernetworking/plugins/plugins/meta/portmap

# Control-plane binaries (etcd, kube-apiserver, ...) built from source by dev/controlplane.
export FLEET_CONTROLPLANE_BIN := $(CURDIR)/dev/bin
# Integration and e2e suites start real clusters: one suite at a time keeps two cores responsive.
TEST_TIMEOUT ?= 45m

.PHONY: image image-push dist helm charts charts-push node help build controlplane deps test test-unit test-integration e2e generate verify verify-fast bench bench-10k bench-25k bench-restart bench-rollout bench-secrets bench-rollback bench-history bench-plan bench-ui quickstart quickstart-check up down clean

help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## build bin/fleet
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/fleet .

image: ## build the OCI image index (linux/amd64, linux/arm64) into bin/image; prints its digest
	@for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(IMAGE_LDFLAGS)" -o bin/linux-$$arch/fleet . || exit 1; \
	done
	$(GO) run ./dev/image $(IMAGE_ARGS)

image-push: image ## push the image index to $(REGISTRY)/fleet:$(VERSION) (REGISTRY=host:port/path; INSECURE=1 for plain HTTP)
	@test -n "$(REGISTRY)" || { echo "image-push: set REGISTRY=host:port/path"; exit 1; }
	$(GO) run ./dev/image $(IMAGE_ARGS) -push $(REGISTRY)/fleet:$(VERSION) $(if $(INSECURE),-insecure)

# Release binaries: the CLI (and everything else) for users' machines.
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

dist: ## release binaries for linux and darwin, amd64 and arm64, with SHA256SUMS, into bin/dist
	rm -rf bin/dist && mkdir -p bin/dist
	@for p in $(PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
		echo "fleet-$$os-$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(IMAGE_LDFLAGS)" -o bin/dist/fleet-$$os-$$arch . || exit 1; \
	done
	cd bin/dist && sha256sum fleet-* > SHA256SUMS

helm: ## the Helm CLI at go.mod's Helm SDK version, into dev/bin
	$(GO) build -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" -o $(HELM) helm.sh/helm/v3/cmd/helm

charts: helm ## package the three charts with the project version and write a Helm repository into bin/charts
	rm -rf bin/charts && mkdir -p bin/charts
	$(HELM) package --version $(CHART_VERSION) --app-version $(VERSION) -d bin/charts $(addprefix charts/,$(CHARTS))
	$(HELM) repo index bin/charts $(if $(CHART_REPO_URL),--url $(CHART_REPO_URL))

charts-push: charts ## push the packaged charts to oci://$(REGISTRY)/charts (INSECURE=1 for plain HTTP)
	@test -n "$(REGISTRY)" || { echo "charts-push: set REGISTRY=host:port/path"; exit 1; }
	@for c in $(CHARTS); do \
		$(HELM) push bin/charts/$$c-$(CHART_VERSION).tgz oci://$(REGISTRY)/charts $(if $(INSECURE),--plain-http) || exit 1; \
	done

node: ## containerd, its runc shim, the CNI plugins and the pause program of the real-node tier, into dev/bin
	cd dev/node && CGO_ENABLED=0 $(GO) build -trimpath -tags "no_btrfs no_devmapper no_zfs" -o $(FLEET_CONTROLPLANE_BIN)/ $(NODE_PKGS)
	cd dev/node && CGO_ENABLED=0 $(GO) build -trimpath -o $(FLEET_CONTROLPLANE_BIN)/cni/ $(CNI_PKGS)

controlplane: ## build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok into dev/bin (skips what is current)
	cd dev/controlplane && $(GO) run . -out $(FLEET_CONTROLPLANE_BIN)

deps: ## install the Debian packages the tests need (dev/deps; as root, or with sudo)
	dev/deps

test: deps verify-fast test-unit test-integration e2e quickstart-check ## everything CI runs (installs what it needs first)

test-unit: ## unit tests of the pure packages
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e /integrationtests/ -e /e2e)

test-integration: deps controlplane node image ## ginkgo suites against real apiservers (and a real node running the image)
	$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./integrationtests/...

e2e: deps controlplane node build image charts ## multi-cluster suites with real fleet processes, and the install walkthrough on real nodes
	@if [ -n "$$(find e2e -name '*_test.go' 2>/dev/null)" ]; then \
		$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./e2e/...; \
	else echo "e2e: no suites yet"; fi

generate: ## regenerate code and CRDs
	$(GO) generate ./...

# The API contract: every field and printer column of Fleet's kinds, measured by ../shared/tools.
CRD_COMPAT ?= ../shared/tools/crd-compat
# crd-compat needs PyYAML; Debian's python3-yaml serves when the default python3 lacks it.
PYTHON_YAML ?= $(shell python3 -c 'import yaml' 2>/dev/null && echo python3 || echo /usr/bin/python3)
API_KINDS := GitRepo,Bundle,BundleDeployment,Cluster,ClusterGroup,ClusterRegistration,ClusterRegistrationToken,BundleNamespaceMapping,GitRepoRestriction,Content,HelmOp,Schedule,ImageScan,Policy

verify-fast: helm ## gofmt, go vet, helm lint --strict of the three charts and the API contract
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd dev/controlplane && $(GO) vet .
	cd dev/node && $(GO) vet ./pause
	$(HELM) lint --strict $(addprefix charts/,$(CHARTS))
	@if [ -x $(CRD_COMPAT) ]; then $(PYTHON_YAML) $(CRD_COMPAT) --kinds $(API_KINDS) --min 100 charts/fleet-crd/templates; \
		else echo "crd-compat not found at $(CRD_COMPAT); API contract not checked"; fi

verify: verify-fast generate ## verify-fast, and generated code is up to date
	@git diff --exit-code --stat || { echo "generated files differ: run make generate and commit"; exit 1; }

# Controller scale: BUNDLES x CLUSTERS BundleDeployments (the issue's full run is 50 x 1000).
BENCH_BUNDLES ?= 5
BENCH_CLUSTERS ?= 1000
# Scale with simulated agents: standard (100, 1,000 and 5,000 clusters; make bench runs it with the
# apply, controller and agent benchmarks within 45 minutes on two cores), small (100 and 1,000,
# about 10 minutes, for iteration). make bench-10k runs the 10,000-cluster experiments.
BENCH_SIZE ?= standard
# Simulated clusters of make bench-restart's manager restart (1000 for iteration: about 6 minutes).
BENCH_RESTART_CLUSTERS ?= 10000

bench: build controlplane ## benchmarks up to 5,000 clusters: JSON and plots in benchmarks/results (not part of test)
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -size $(BENCH_SIZE)
ifeq ($(BENCH_SIZE),standard)
	$(GO) run ./benchmarks/apply -fleet bin/fleet -out benchmarks/results
	$(GO) run ./benchmarks/controller -fleet bin/fleet -out benchmarks/results -bundles $(BENCH_BUNDLES) -clusters $(BENCH_CLUSTERS)
	$(GO) run ./benchmarks/agent -fleet bin/fleet -out benchmarks/results
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -rollout 1000
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -secrets 1000
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -rollback 1000
	$(GO) run ./benchmarks/history -fleet bin/fleet -out benchmarks/results
	$(GO) run ./benchmarks/plan -fleet bin/fleet -out benchmarks/results
	$(GO) run ./benchmarks/ui -out benchmarks/results
endif

bench-ui: ## the web UI's page times at 1,000 and 10,000 clusters x 50 bundles (about a minute)
	$(GO) run ./benchmarks/ui -out benchmarks/results

bench-plan: build ## fleet plan offline, 50 bundles against 1,000 to 10,000 clusters (under a minute)
	$(GO) run ./benchmarks/plan -fleet bin/fleet -out benchmarks/results

bench-rollout: build controlplane ## progressive rollouts at 1,000 simulated clusters in three stages (about 7 minutes)
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -rollout 1000

bench-secrets: build controlplane ## a SOPS secret sealed to each of 1,000 simulated clusters, then a changed value (about 4 minutes)
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -secrets 1000

bench-rollback: build controlplane ## fleet rollback of 1,000 simulated clusters to an earlier revision (about 5 minutes)
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -rollback 1000

bench-history: build controlplane ## the deployment history at 1,000 and 10,000 clusters x 100 revisions: record size, fleet history answers (about 2 minutes)
	$(GO) run ./benchmarks/history -fleet bin/fleet -out benchmarks/results

bench-restart: build controlplane ## restarts at scale: the manager at 10,000 clusters x 5 bundles (restart, fail-over), the agent at 1,000 BundleDeployments (about 45 minutes)
	$(GO) run ./benchmarks/agent -fleet bin/fleet -out benchmarks/results -restart 1000
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -restart $(BENCH_RESTART_CLUSTERS)

bench-25k: build controlplane ## 25,000 simulated clusters registering in waves of 5,000 and checking in for 10 minutes, no bundles: the capacity model's check (about 40 minutes)
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -size 25k -shards=false

bench-10k: build controlplane ## the 10,000-cluster experiments (about 45 minutes on two cores)
	$(GO) run ./benchmarks/scale -fleet bin/fleet -out benchmarks/results -size 10k -shards=false

quickstart: build controlplane ## the whole system locally: three clusters, controller, agents, git and chart repositories, example GitRepos
	$(GO) build -o dev/bin/quickstart ./dev/quickstart
	dev/bin/quickstart -fleet bin/fleet -root .

quickstart-check: build controlplane ## the quickstart, stopped once every GitRepo and HelmOp is Ready (fails otherwise)
	$(GO) build -o dev/bin/quickstart ./dev/quickstart
	dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && dev/bin/quickstart -fleet bin/fleet -root . -dir "$$dir" -timeout 5m -exit-when-ready

up: ## start the dev clusters in the background (dev/up)
	dev/up

down: ## stop the quickstart and the dev clusters
	@if [ -x dev/bin/quickstart ]; then dev/bin/quickstart --down; fi
	dev/down

clean: ## remove build output (keeps the control-plane binaries)
	rm -rf bin
