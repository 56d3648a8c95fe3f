# sriov-lane: see README.md. Everything here runs as root on a Debian host.
SHELL := /bin/bash
GO ?= go
export PATH := /usr/local/go/bin:$(PATH)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/sriov-lane/sriov-lane/pkg/cmd.version=$(VERSION) -X github.com/sriov-lane/sriov-lane/pkg/cmd.commit=$(COMMIT)

# Test assets (kube-apiserver, etcd) built by hack/test-env.sh.
export SRIOV_LANE_TEST_ASSETS := $(CURDIR)/bin/test-assets
TEST_TIMEOUT ?= 25m
# Extra arguments for go test, e.g. TESTFLAGS='-run TestUp -v'.
TESTFLAGS ?=
# e2e tests that each bring their own lane up run this many at a time. The
# suite is CPU-bound either way; 6 (from 4) starts the long chains early
# enough that they do not end alone, on a half-idle machine.
TEST_PARALLEL ?= 6
LANE_ARGS ?=

.PHONY: all build lane test test-env unit vet fmt bench clean manifests demo demo-down

all: build

build: ## bin/sriov-lane
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/sriov-lane ./cmd/sriov-lane

lane: build ## bring up a lane with defaults on this SR-IOV host (LANE_ARGS for flags)
	bin/sriov-lane up $(LANE_ARGS)

demo: test-env build ## a lane on the test rig (stand-in NICs and nodes), left up; make demo-down ends it
	hack/demo.sh up

demo-down: build ## tear down what make demo brought up
	hack/demo.sh down

test-env: ## install and start what the tests need; idempotent, seconds when present
	hack/test-env.sh

# `make test` is the README's test command and what CI runs: set up, then
# run every test. SRIOV_LANE_TEST_STRICT=1 turns a missing prerequisite into
# a failure instead of a skip, so nothing silently goes untested.
# Stand-ins with their own Go module (kept out of the product's dependency
# graph); vet and test them too.
STANDIN_MODULES := test/standin/sriovdp test/standin/flannelcni test/standin/sriovcni

# The e2e package, the longest by far, and the rig's own cluster test are
# named first so go test starts them first; the rest fit beside them.
TEST_PKGS ?= ./test/e2e ./test/standin/k3drig ./...
# Test binaries run at once: the e2e package holds one slot for its whole
# run, and the cluster-making packages beside it must not queue behind
# each other in the second.
TEST_PROCS ?= 4

test: test-env vet
	rc=0; SRIOV_LANE_TEST_STRICT=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -p $(TEST_PROCS) -parallel $(TEST_PARALLEL) $(TESTFLAGS) $(TEST_PKGS) || rc=1; \
	for m in $(STANDIN_MODULES); do (cd $$m && SRIOV_LANE_TEST_STRICT=1 $(GO) test -count=1 $(TESTFLAGS) ./...) || rc=1; done; \
	exit $$rc

unit: ## tests that need neither root nor Docker (others skip)
	$(GO) test -count=1 ./...

vet:
	@test -z "$$(gofmt -l cmd pkg test hack)" || { echo "gofmt needed:"; gofmt -l cmd pkg test hack; exit 1; }
	$(GO) vet ./...
	for m in $(STANDIN_MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

fmt:
	gofmt -w cmd pkg test hack

manifests: ## render the objects up applies into manifests/ (a test keeps them in step)
	$(GO) run ./hack/manifests -out manifests

bench: test-env build ## benchmarks against the shell-provider sequence, printed as ratios
	hack/bench.sh

clean:
	rm -rf bin _out
