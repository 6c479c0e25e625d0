# mizzen: `make run` starts a single-node cluster, `make test` runs every test.
# Both install what they need first (Debian packages through apt-get).

SHELL := /bin/bash
GO ?= go
OUT := _output
BIN := $(OUT)/bin/mizzen
DATA_DIR ?= /var/lib/mizzen
# Static binaries: nothing here needs cgo, and with it kustomize's import of Go's plugin
# package makes the binary dynamically linked with every symbol exported, which costs
# each mizzen process about 28 MiB more resident memory.
export CGO_ENABLED := 0
# Debian packages the cluster and the tests need, and a command that proves each is there.
APT_PACKAGES := containerd:containerd runc:runc containernetworking-plugins:/usr/lib/cni/bridge \
	nftables:nft iproute2:ip busybox-static:/bin/busybox iptables:iptables chromium:/usr/bin/chromium \
	mount:losetup libnss3-tools:/usr/bin/pk12util openssl:/usr/bin/openssl

# The version stamp, as upstream's release build sets it: the same -X variables in
# k8s.io/component-base/version (kubectl version, /version) and k8s.io/client-go/pkg/version.
GIT_VERSION := v1.37.2+mizzen
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
GIT_TREE_STATE := $(shell if [ -z "$$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then echo clean; else echo dirty; fi)
BUILD_DATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(GIT_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=37 -X $(p).gitCommit=$(GIT_COMMIT) \
	-X $(p).gitTreeState=$(GIT_TREE_STATE) -X $(p).buildDate=$(BUILD_DATE))

.PHONY: all build run stop killall uninstall test deps vet unit images fmt clean conformance containerd

all: build

## deps: install the Debian packages that are missing (nothing when all are present)
deps:
	@missing=""; for p in $(APT_PACKAGES); do pkg=$${p%%:*}; probe=$${p#*:}; \
	  if ! command -v $$probe >/dev/null 2>&1 && [ ! -e $$probe ]; then missing="$$missing $$pkg"; fi; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

## build: the one binary, bin/mizzen, and the static sandbox (pause) program beside it
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/mizzen
	$(GO) build -ldflags=-s -o $(OUT)/bin/mizzen-pause ./internal/kubelet/containerd/pause

## images: the test images mizzen.local/agnhost:v1 and mizzen.local/busybox:v1 as OCI
## archives in _output/images (load them with `mizzen image import`, or put them in
## DATA_DIR/agent/images before the agent starts)
images: deps
	$(GO) run ./test/images/build -out $(OUT)/images

## run: start a single-node cluster in the background and print how to use it
## (CONTAINERD=/path/to/containerd runs its agent on that containerd, e.g. `make containerd`'s)
run: deps build images
	@$(MAKE) --no-print-directory stop
	@mkdir -p $(DATA_DIR)/agent/images
	@cp $(OUT)/images/*.tar $(DATA_DIR)/agent/images/   # the agent imports them as it starts
	@hack/start-server.sh $(BIN) $(DATA_DIR) $(OUT)/server.log $(OUT)/server.pid $(if $(CONTAINERD),--containerd $(abspath $(CONTAINERD)))
	@echo "mizzen is running (pid $$(cat $(OUT)/server.pid), log $(OUT)/server.log, data $(DATA_DIR))."
	@echo "  export KUBECONFIG=$(DATA_DIR)/admin.kubeconfig"
	@echo "  $(BIN) kubectl get namespaces       # or any kubectl of your own"
	@echo "  $(BIN) kubectl run web --image mizzen.local/agnhost:v1 -- netexec   # the test images are on the node"
	@grep -o 'mizzen dashboard at https://[^ ]*' $(OUT)/server.log | sed 's/^mizzen /  /; s/$$/   (log in: docs\/dashboard.md)/' || true
	@echo "  make stop                            # stop the server (pods keep running; the next start adopts them)"
	@echo "  make killall                         # stop everything, pods included, and clean the host"

## stop: stop the server started by make run; its pods keep running, as upstream's do
## when a kubelet stops, and the next `make run` adopts them
stop:
	@if [ -f $(OUT)/server.pid ]; then pid=$$(cat $(OUT)/server.pid); kill $$pid 2>/dev/null || true; \
	  for i in $$(seq 1 300); do kill -0 $$pid 2>/dev/null || break; sleep 0.1; done; rm -f $(OUT)/server.pid; fi

## killall: stop every mizzen process and pod of DATA_DIR and remove their mounts,
## cgroups, pod network and nftables tables (k3s-killall.sh's job); the data stays
killall: build
	@$(BIN) killall --data-dir $(DATA_DIR)
	@rm -f $(OUT)/server.pid

## uninstall: killall, then remove DATA_DIR and everything in it
uninstall: build
	@$(BIN) uninstall --data-dir $(DATA_DIR)
	@rm -f $(OUT)/server.pid

## test: install what the tests need (packages, test images), then vet and run every test.
## ./test/e2e is named first so that go test builds and starts it first: it is the
## longest package, and the others run beside it. -vet=off: the vet target has just
## checked every package, tests included, with all of vet's analyzers.
test: deps vet images
	@hack/check-disk.sh $${TMPDIR:-/tmp} 8
	$(GO) test -count=1 -vet=off -timeout 40m ./test/e2e ./...

## conformance: build upstream's conformance suite from the Go module proxy and run it
## against a fresh `mizzen server` on the default ports (FOCUS, SKIP, PROCS, MINUTES, NODES;
## CONFORMANCE_KUBECONFIG for a running cluster); results in _output/conformance
conformance: deps build
	FOCUS='$(FOCUS)' SKIP='$(SKIP)' PROCS='$(PROCS)' MINUTES='$(MINUTES)' NODES='$(NODES)' CONTAINERD='$(CONTAINERD)' ./test/conformance/run.sh

## containerd: containerd v2.4.2 (with its shim and ctr) built from the Go module proxy into
## _output/containerd/bin, for image volumes, which Debian's containerd 1.6 cannot mount:
## `make run CONTAINERD=_output/containerd/bin/containerd`. Never built by run or test
## (20 minutes or more on 2 cores with a cold Go build cache)
containerd:
	hack/build-containerd.sh $(CURDIR)/$(OUT)/containerd/bin

vet:
	@test -z "$$(gofmt -l cmd internal test bench 2>/dev/null)" || { echo "gofmt needed:"; gofmt -l cmd internal test bench; exit 1; }
	$(GO) vet ./...

fmt:
	gofmt -w cmd internal test bench 2>/dev/null || true

clean:
	rm -rf $(OUT)
