# sriov-lane: see README.md. Everything here runs as root on a Debian host.
SHELL := /bin/bash
GO ?= go
export PATH := /usr/local/go/bin:$(PATH)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/sriov-lane/sriov-lane/pkg/cmd.version=$(VERSION) -X github.com/sriov-lane/sriov-lane/pkg/cmd.commit=$(COMMIT)

# Test assets (kube-apiserver, etcd) built by hack/test-env.sh.
export SRIOV_LANE_TEST_ASSETS := $(CURDIR)/bin/test-assets
# Extra arguments for go test, e.g. TESTFLAGS='-run TestUp -v'.
TESTFLAGS ?=
LANE_ARGS ?=

.PHONY: all help build lane test test-env test-unit test-apiserver test-cluster test-kernel test-disruptive verify vet lint shellcheck maps fmt bench clean manifests docs demo demo-down

all: build

help: ## list the targets
	@awk -F ':.*## ' '/^[a-zA-Z_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## bin/sriov-lane
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/sriov-lane ./cmd/sriov-lane

lane: build ## bring up a lane with defaults on this SR-IOV host (LANE_ARGS for flags)
	bin/sriov-lane up $(LANE_ARGS)

demo: test-env build ## a lane on the test rig (stand-in NICs and nodes), left up; make demo-down ends it
	hack/demo.sh up

demo-down: build ## tear down what make demo brought up
	hack/demo.sh down

# hack/test-env.sh sets up the host, then builds bin/lane-rig and runs
# `lane-rig env` (test/rig/cmd/lane-rig/env.go) for the tools, images and
# rig registry.
test-env: ## install and start what the tests need; idempotent, seconds when present
	hack/test-env.sh

# `make test` is the README's test command and what CI runs: set up,
# verify, then every test, in tiers one after another (hack/test-tiers.sh:
# which packages each tier runs, its parallelism from the cores, its
# timeout). Each tier alone is make test-<tier>.
# Stand-ins with their own Go module (kept out of the product's dependency
# graph); vet, lint and test them too.
STANDIN_MODULES := test/standin/sriovdp test/standin/flannelcni test/standin/sriovcni test/standin/localpath test/standin/drasriov

# Reports of make test, where CI collects them: ARTIFACTS when set (Prow's
# convention), else bin/reports. As kind's hack/make-rules/test.sh@v0.32.0
# does, gotestsum runs go test, passing its output through, and writes JUnit;
# go test writes a coverage profile over every package of the module
# (-coverpkg), and go tool cover renders it as HTML. One of each per tier
# (and stand-in module): junit_<tier>.xml, coverage_<tier>.out and .html, and
# timing_<tier>.json, each test's end with its time and duration, to see
# which tests ran beside which and which ended last (JUnit has durations,
# not ends) (gotestsum reads go test -json from $(GO), so GO= still chooses
# the toolchain); and output_<tier>-<module>.txt, a stand-in module's go
# test output (those run beside their tier's and print after it).
export REPORT_DIR := $(abspath $(or $(ARTIFACTS),bin/reports))
export GO TESTFLAGS

test: test-env verify bin/gotestsum ## the README's test command: test-env, verify, then every tier
	hack/test-tiers.sh

test-unit: bin/gotestsum ## tier: tests that need neither root, Docker, a control plane nor a guest
	hack/test-tiers.sh unit

test-apiserver: test-env bin/gotestsum ## tier: tests on a real etcd and kube-apiserver
	hack/test-tiers.sh apiserver

test-cluster: test-env bin/gotestsum ## tier: root or Docker: the rig, k3d clusters, the e2e lanes
	hack/test-tiers.sh cluster

test-kernel: test-env bin/gotestsum ## tier: the kernel tier's QEMU guests
	hack/test-tiers.sh kernel

test-disruptive: test-env bin/gotestsum ## tier: the dockerd restart and the random kills, alone
	hack/test-tiers.sh disruptive

verify: vet lint shellcheck maps ## gofmt, go vet, golangci-lint, shellcheck, the layering and doc-map tests

vet: ## gofmt every Go file; go vet the product and stand-in modules
	@test -z "$$(gofmt -l cmd pkg test hack)" || { echo "gofmt needed:"; gofmt -l cmd pkg test hack; exit 1; }
	$(GO) vet ./...
	for m in $(STANDIN_MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

# The pinned programs verify and CI use, each built from its own module in
# hack/tools (as test-env builds the Kubernetes ones) so their dependencies
# stay out of the product's and the Kubernetes build's. A rule on go.mod and
# go.sum rebuilds one only when its pin moves; the first build of
# golangci-lint takes ~4 min on an empty Go build cache, seconds on a warm one.
bin/golangci-lint: hack/tools/golangci-lint/go.mod hack/tools/golangci-lint/go.sum
	cd hack/tools/golangci-lint && $(GO) build -o $(CURDIR)/$@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

bin/gotestsum: hack/tools/gotestsum/go.mod hack/tools/gotestsum/go.sum
	cd hack/tools/gotestsum && $(GO) build -o $(CURDIR)/$@ gotest.tools/gotestsum

# golangci-lint sees one module at a time, as kind lints its kindnetd module
# in a second run (kubernetes-sigs/kind hack/make-rules/verify/lint.sh@v0.32.0).
lint: bin/golangci-lint ## golangci-lint with hack/tools/.golangci.yml over the product and stand-in modules
	rc=0; for m in . $(STANDIN_MODULES); do (cd $$m && $(CURDIR)/bin/golangci-lint run --config $(CURDIR)/hack/tools/.golangci.yml ./...) || rc=1; done; exit $$rc

# Every script git tracks whose first line runs a shell. shellcheck comes
# from Debian, installed here on a machine that lacks it (make test-env
# installs the rest of what the tests need).
SHELL_SCRIPTS = $(shell git ls-files | while read -r f; do head -c 64 "$$f" 2>/dev/null | head -n 1 | grep -qE '^\#!.*\b(ba|da)?sh\b' && echo "$$f"; done)

shellcheck: ## shellcheck every script
	@command -v shellcheck >/dev/null || apt-get install -y --no-install-recommends shellcheck || { apt-get update && apt-get install -y --no-install-recommends shellcheck; }
	shellcheck --external-sources $(SHELL_SCRIPTS)

# The tests that keep the maps true: README's floors (hack/layers) and each
# package doc's file map (a TestDocFileMap in the package's doc_test.go).
# The stand-in modules' maps are tested inside each module.
DOC_MAP_PKGS = $(filter-out $(addprefix ./,$(STANDIN_MODULES)),$(sort $(patsubst %/,./%,$(dir $(shell grep -l '^func TestDocFileMap' $$(git ls-files '*doc_test.go'))))))

# A doc-map test reads only its package's own files, which are its test
# binary's inputs too, so go test's cache of its result is exact: a warm
# make test runs them again only where a package changed (1 s, not 20).
# The layering test reads every package through go list, outside what the
# cache sees, so it always runs.
maps: ## the layering test and the doc-map tests
	$(GO) test -count=1 ./hack/layers
	$(GO) test -run '^TestDocFileMap$$' $(DOC_MAP_PKGS)
	for m in $(STANDIN_MODULES); do if [ -f $$m/doc_test.go ]; then (cd $$m && $(GO) test -run '^TestDocFileMap$$' .) || exit 1; fi; done

fmt: ## gofmt -w every Go file
	gofmt -w cmd pkg test hack

manifests: ## render the objects up applies into manifests/ (a test keeps them in step)
	$(GO) run ./hack/manifests -out manifests

docs: ## write the CLI and configuration references into docs/reference/ (a test keeps them in step)
	$(GO) run ./hack/docs

bench: test-env build ## benchmarks against the shell-provider sequence, printed as ratios
	hack/bench.sh

clean: ## remove bin/ and _out/
	rm -rf bin _out
