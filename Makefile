# Engram — build, generate, test, demo, bench.
# Every target works on a fresh Linux machine with Go 1.26 (and root or a
# DATABASE_URL for the targets that need PostgreSQL): tools are installed at
# pinned versions into ./bin, slow artifacts are cached in $(ENGRAM_CACHE).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

IMG ?= ghcr.io/engram-dev/engram:dev
LOCALBIN ?= $(CURDIR)/bin
export ENGRAM_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/engram

CONTROLLER_TOOLS_VERSION ?= v0.23.0
STATICCHECK_VERSION ?= v0.8.2
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0
KUSTOMIZE_VERSION ?= v5.7.1
KUBE_SCORE_VERSION ?= v1.20.0
REDOCLY_VERSION ?= 2.77.0

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
STATICCHECK ?= $(LOCALBIN)/staticcheck-$(STATICCHECK_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
KUBE_SCORE ?= $(LOCALBIN)/kube-score-$(KUBE_SCORE_VERSION)
REDOCLY ?= $(LOCALBIN)/redocly-$(REDOCLY_VERSION)/node_modules/.bin/redocly

# go test flags for `make test`; e.g. make test TEST_FLAGS='-run TestSmoke -v'
TEST_FLAGS ?=
TEST_PKGS ?= ./...
# The suites `make test` runs a second time with every database on Citus:
# everything Engram sends to PostgreSQL is in these packages (the operator
# and the jobs reach the database only through them).
CITUS_PKGS ?= ./internal/tenant/ ./internal/memory/ ./internal/server/

# Every binary is built with the flags hack/envtest.sh uses for kube-apiserver
# and etcd: the shared Kubernetes packages then compile once into the Go build
# cache instead of once per flag set, which is most of a cold `make demo`.
GOBUILD = CGO_ENABLED=0 go build -trimpath

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the markers in api/ and internal/controller/.
	$(CONTROLLER_GEN) rbac:roleName=engram-manager crd:allowDangerousTypes=true webhook paths="./api/..." paths="./internal/controller/..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@mkdir -p charts/engram/crds charts/engram/files && cp config/crd/bases/*.yaml charts/engram/crds/ && cp config/rbac/role.yaml charts/engram/files/role.yaml
	@cp config/grafana/engram-dashboard.json config/prometheus/engram-rules.yaml config/admission/metadata-bounds.yaml charts/engram/files/

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run gofmt on the product and the tools module.
	gofmt -l -w $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: vet $(STATICCHECK) $(GOLANGCI_LINT) ## Run go vet, staticcheck and golangci-lint (.golangci.yml: import grouping, error wrapping, unused results).
	$(STATICCHECK) ./...
	# Serialised around golangci-lint's lock, not refused: another checkout's
	# make lint on the same machine failed the CI with "parallel
	# golangci-lint is running".
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

.PHONY: lint-fix
lint-fix: $(GOLANGCI_LINT) ## Group and format imports as make lint wants them (golangci-lint fmt).
	$(GOLANGCI_LINT) fmt ./...

##@ Test

.PHONY: pg-start
pg-start: ## Start the local pgvector PostgreSQL (or use DATABASE_URL) and print its URL.
	@hack/pgvector.sh start

.PHONY: pg-stop
pg-stop: ## Stop the local pgvector PostgreSQL started by pg-start.
	@hack/pgvector.sh stop

.PHONY: citus-start
citus-start: ## Start the local Citus cluster, a coordinator and two workers (or use CITUS_URL), and print its URL.
	@hack/citus.sh start

.PHONY: citus-stop
citus-stop: ## Stop the local Citus cluster started by citus-start.
	@hack/citus.sh stop

.PHONY: envtest
envtest: ## Build kube-apiserver + etcd from Go modules (once) and print KUBEBUILDER_ASSETS.
	@hack/envtest.sh

.PHONY: openapi-lint
openapi-lint: $(REDOCLY) ## Lint internal/server/openapi.yaml with Redocly CLI's recommended rules: 0 errors (warnings are listed).
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(REDOCLY) lint --extends recommended --format summary internal/server/openapi.yaml

.PHONY: test
test: manifests generate openapi-lint $(HELM) $(KUSTOMIZE) $(KUBE_SCORE) ## Provision PostgreSQL + Citus + control plane + Chromium + an S3 server, then run every suite with -race.
	@echo ">> PostgreSQL with pgvector (fast, non-durable server settings: tests only; the fault suite runs its own server)"; \
	DATABASE_URL="$$(ENGRAM_PG_DURABILITY=fast hack/pgvector.sh start)"; \
	echo ">> Citus: a coordinator and two workers (built once, ~4 min; fast settings)"; \
	CITUS_URL="$$(ENGRAM_PG_DURABILITY=fast hack/citus.sh start)"; \
	echo ">> kube-apiserver + etcd for envtest"; \
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)"; \
	echo ">> Chromium for the console's browser test (CHROME_PATH, else Debian's chromium, installed when missing)"; \
	CHROME_PATH="$$(hack/chromium.sh)"; \
	echo ">> S3-compatible server for the export tests (tools/s3server, built once; ENGRAM_TEST_S3_ENDPOINT uses yours)"; \
	ENGRAM_S3SERVER="$$(hack/s3server.sh)"; \
	export DATABASE_URL CITUS_URL KUBEBUILDER_ASSETS CHROME_PATH ENGRAM_S3SERVER ENGRAM_TEST_REQUIRE_INFRA=1 ENGRAM_HELM=$(HELM) ENGRAM_KUSTOMIZE=$(KUSTOMIZE) ENGRAM_KUBE_SCORE=$(KUBE_SCORE); \
	echo ">> smoke tests of the test infrastructure (must PASS, never SKIP)"; \
	go test -race -count=1 -v -run '^TestSmoke' ./internal/testenv/ | grep -E '^(=== RUN|--- |\s+\S+_test.go|ok|FAIL|PASS)'; \
	echo ">> fault suite: PostgreSQL restarted and killed under load (acknowledged / lost / evicted / failed writes in the log; a reported request with its service log lines)"; \
	go test -race -count=1 -v -timeout 20m $(TEST_FLAGS) ./test/faults/ | grep -E '^(=== RUN|\s*--- |\s+\S+_test.go|        |WARNING: DATA RACE|ok|FAIL|PASS)'; \
	echo ">> go test -race $(TEST_PKGS) (KUBEBUILDER_ASSETS=$$KUBEBUILDER_ASSETS)"; \
	go test -race -count=1 -timeout 60m $(TEST_FLAGS) $$(go list $(TEST_PKGS) | grep -v -e '/test/faults$$' -e '/test/node$$'); \
	echo ">> the tenant, memory and service suites again, every database on Citus (ENGRAM_TEST_ON_CITUS=1; TestCitus* ran above; no -race: the same code ran under the race detector above, this pass is about the SQL)"; \
	ENGRAM_TEST_ON_CITUS=1 go test -count=1 -timeout 60m -skip '^TestCitus' $(TEST_FLAGS) $(CITUS_PKGS); \
	echo ">> node suite: a real single-node Kubernetes (hack/cluster.sh, or your KUBECONFIG), the chart installed, Engram on real Pods; the machine left as found"; \
	go test -race -count=1 -v -timeout 60m $(TEST_FLAGS) ./test/node/ | grep -E '^(=== RUN|\s*--- |\s+\S+_test.go|WARNING: DATA RACE|ok|FAIL|PASS)'

# FUZZTIME is how long `make fuzz` fuzzes each target; FUZZ_MATCH (a regex
# on "package FuzzName") picks some, e.g. make fuzz FUZZ_MATCH=auth FUZZTIME=30s.
FUZZTIME ?= 60s

.PHONY: fuzz
fuzz: ## Fuzz each Go fuzz target for FUZZTIME (default 60s), one after the other (list in hack/fuzz.sh; no database needed).
	@hack/fuzz.sh check
	@hack/fuzz.sh $(FUZZTIME)

##@ Demo

DEMO ?= $(LOCALBIN)/engram-demo
# DEMO_CITUS=false leaves the Citus cluster and the tenant on it out of the
# demo (its first build takes minutes).
DEMO_CITUS ?= true

.PHONY: demo
demo: build ## Run Engram end to end here (control plane, operator, PostgreSQL, Citus, services) and leave it running.
	@$(GOBUILD) -o $(DEMO) ./hack/demo
	@$(DEMO) up --binary $(LOCALBIN)/manager --repo-root $(CURDIR) --citus=$(DEMO_CITUS)

.PHONY: demo-node
demo-node: build image $(HELM) ## Run the demo on a real single-node Kubernetes (hack/cluster.sh, root): the image loaded, the chart installed, real Pods.
	@$(GOBUILD) -o $(DEMO) ./hack/demo
	@$(DEMO) up --node --binary $(LOCALBIN)/manager --repo-root $(CURDIR) --image-tar $(IMAGE_DIR)/engram-docker-amd64.tar --image $(IMG) --helm $(HELM)

.PHONY: demo-down
demo-down: ## Stop everything make demo started.
	@$(GOBUILD) -o $(DEMO) ./hack/demo
	@$(DEMO) down --repo-root $(CURDIR)

.PHONY: demo-status
demo-status: ## Show what the demo runs.
	@$(GOBUILD) -o $(DEMO) ./hack/demo
	@$(DEMO) status --repo-root $(CURDIR)

##@ Node (a real single-node Kubernetes here, no Docker: hack/cluster.sh)

.PHONY: cluster-up
cluster-up: ## Start the node (builds kubelet & co. from Go modules once) and print its kubeconfig.
	@hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the node and undo every change it made to the machine.
	@hack/cluster.sh down

.PHONY: cluster-status
cluster-status: ## Say whether the node runs, or what of it is left on the machine.
	@hack/cluster.sh status

##@ Build

.PHONY: build
build: ## Build the manager into bin/manager and the kubectl plugin into bin/kubectl-engram.
	$(GOBUILD) -o $(LOCALBIN)/manager ./cmd/manager
	$(GOBUILD) -o $(LOCALBIN)/kubectl-engram ./cmd/kubectl-engram

# IMAGE_DIR receives the OCI layout, its tarball and the docker-load
# tarballs; the binaries are built like the Dockerfile builds them.
IMAGE_DIR ?= $(CURDIR)/dist/image
IMAGE_BIN ?= $(CURDIR)/dist/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)

.PHONY: image
image: ## Build the multi-arch (amd64, arm64) OCI image without Docker into dist/image (go-containerregistry, hack/image).
	@for arch in amd64 arm64; do \
		echo ">> manager for linux/$$arch"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch go build -trimpath -ldflags="-s -w" -o $(IMAGE_BIN)/linux_$$arch/manager ./cmd/manager; \
	done
	cd hack/image && go run . --binary-amd64 $(IMAGE_BIN)/linux_amd64/manager --binary-arm64 $(IMAGE_BIN)/linux_arm64/manager \
		--out $(IMAGE_DIR) --tag $(IMG) --version $(VERSION) --revision "$(REVISION)"

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	DOCKER_BUILDKIT=1 docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMG) .

.PHONY: helm-lint
helm-lint: manifests $(HELM) ## Lint and render the Helm chart.
	$(HELM) lint charts/engram
	$(HELM) template engram charts/engram --namespace engram-system >/dev/null
	$(HELM) template engram charts/engram --namespace engram-system --set serviceMonitor.enabled=true --set watchNamespaces='{team-a,team-b}' --set networkPolicy.allowedNamespaces='{monitoring}' >/dev/null
	$(HELM) template engram charts/engram --namespace engram-system --set networkPolicy.enabled=false >/dev/null
	$(HELM) template engram charts/engram --namespace engram-system --set podMonitor.enabled=true --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true --set podMonitor.namespaces='{team-a}' >/dev/null

.PHONY: kube-score
kube-score: $(HELM) $(KUBE_SCORE) ## Run kube-score on the operator's golden objects and the chart; fails on findings not kept on purpose (test/packaging/kubescore_test.go).
	ENGRAM_KUBE_SCORE=$(KUBE_SCORE) ENGRAM_HELM=$(HELM) ENGRAM_TEST_REQUIRE_INFRA=1 go test -count=1 -v -run '^TestKubeScore$$' ./test/packaging/

.PHONY: kustomize-build
kustomize-build: manifests $(KUSTOMIZE) ## Render config/default with kustomize.
	$(KUSTOMIZE) build config/default >/dev/null

##@ Benchmark

# N sets the MemoryRuntimes of the operator part (make bench-full N=1000);
# BENCH_FLAGS passes more flags to the harness (go run ./bench -h).
N ?=
BENCH_FLAGS ?=

.PHONY: bench
bench: ## Short benchmark (about 17 min): service vs raw SQL and on Citus vs plain, filtered search, client vectors, conversations, jobs, operator; writes bench/results/.
	@$(call run-bench,short)

.PHONY: bench-full
bench-full: ## Full benchmark at the sizes of issue 7 (N=1000 for 1,000 runtimes); writes bench/results/.
	@$(call run-bench,full)

# run-bench provisions PostgreSQL, Citus and the envtest binaries, builds
# the manager (the binary under test) and the harness, and runs mode $(1).
# The servers run durable (fsync on, the scripts' default), so the add
# figures with and without synchronous commit mean what they say, and the
# service on Citus is compared with plain PostgreSQL on equal terms.
define run-bench
echo ">> PostgreSQL with pgvector (durable settings)"; \
DATABASE_URL="$$(hack/pgvector.sh start)"; \
echo ">> Citus: a coordinator and two workers (durable settings; built once, ~4 min)"; \
CITUS_URL="$$(hack/citus.sh start)"; \
echo ">> kube-apiserver + etcd for envtest"; \
KUBEBUILDER_ASSETS="$$(hack/envtest.sh)"; \
export DATABASE_URL CITUS_URL KUBEBUILDER_ASSETS; \
echo ">> building bin/manager and bin/enginebench"; \
mkdir -p $(LOCALBIN); \
$(GOBUILD) -o $(LOCALBIN)/manager ./cmd/manager; \
$(GOBUILD) -o $(LOCALBIN)/enginebench ./bench; \
$(LOCALBIN)/enginebench --mode=$(1) --manager=$(LOCALBIN)/manager --out=bench/results $(if $(N),--runtimes=$(N)) $(BENCH_FLAGS)
endef

##@ Tools (pinned, installed into ./bin)

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

$(CONTROLLER_GEN): | $(LOCALBIN)
	$(call go-install,sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION),$@)

$(STATICCHECK): | $(LOCALBIN)
	$(call go-install,honnef.co/go/tools/cmd/staticcheck,$(STATICCHECK_VERSION),$@)

$(GOLANGCI_LINT): | $(LOCALBIN)
	$(call go-install,github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION),$@)

$(HELM): | $(LOCALBIN)
	$(call go-install,helm.sh/helm/v3/cmd/helm,$(HELM_VERSION),$@)

$(KUSTOMIZE): | $(LOCALBIN)
	$(call go-install,sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION),$@)

$(KUBE_SCORE): | $(LOCALBIN)
	$(call go-install,github.com/zegl/kube-score/cmd/kube-score,$(KUBE_SCORE_VERSION),$@)

# Redocly CLI comes from npm (Node.js 20 or later), pinned, into ./bin.
$(REDOCLY): | $(LOCALBIN)
	@command -v npm >/dev/null || { echo "openapi-lint needs Node.js 20+ with npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
	@echo ">> installing @redocly/cli@$(REDOCLY_VERSION)"
	npm install --prefix $(LOCALBIN)/redocly-$(REDOCLY_VERSION) --no-audit --no-fund --ignore-scripts --silent @redocly/cli@$(REDOCLY_VERSION)

# go-install installs package $(1) at version $(2) as the file $(3).
define go-install
@echo ">> installing $(1)@$(2)"
@tmp=$$(mktemp -d); GOBIN=$$tmp go install $(1)@$(2); mv $$tmp/* $(3); rm -rf $$tmp
endef
