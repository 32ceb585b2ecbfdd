# Content Ledger: one workspace, three services, shared contracts in pkg/.
# `make run` starts the whole system locally; `make test` runs every test.

GO        ?= go
PACKAGES  := ./pkg/... ./services/validator/... ./services/edge/... ./services/chain-watcher/... ./tools/... ./tests/...
BENCHTIME ?= 1s
BENCHCOUNT ?= 1
GOLANGCI  := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
PROTOC_GEN_GO := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12

# The version and revision every binary is stamped with (pkg/buildinfo, docs/adr/0044): from git in a
# work tree (a v* tag, else 0.0.0-dev), else from the VERSION and REVISION files a source archive carries.
# Set either on the command line to override: make release VERSION=1.2.0.
VERSION  ?= $(shell { test -e .git && git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null; } || cat VERSION 2>/dev/null || echo 0.0.0-dev)
REVISION ?= $(shell { test -e .git && git rev-parse HEAD 2>/dev/null; } || cat REVISION 2>/dev/null || echo unknown)
VERSION  := $(VERSION)
REVISION := $(REVISION)
# Static, stripped, -trimpath, stamped, with cgo where a C compiler for the target exists: tools/gobuild.sh.
GOBUILD   := GO=$(GO) VERSION=$(VERSION) REVISION=$(REVISION) bash tools/gobuild.sh
# What a release ships and what the images hold.
SERVICES  := ./services/validator/cmd/validator ./services/edge/cmd/edge ./services/chain-watcher/cmd/chain-watcher
RELEASE_PLATFORMS := linux/amd64 linux/arm64
# Images: podman, else docker; for this machine's architecture unless IMAGE_ARCH says otherwise.
CONTAINER  ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || echo docker)
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_PREFIX ?= contentledger/
IMAGE_TAG  ?= $(subst +,-,$(VERSION))
IMAGES     := validator edge chain-watcher devchain
CA_CERTS   ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_SOURCE := https://github.com/contentledger/contentledger

.PHONY: run test test-short generate lint bench bench-packages bench-cluster bench-pipeline bench-flood bench-edge bench-watcher bench-events bench-blob bench-soak fuzz build version release images $(addprefix image-,$(IMAGES)) tidy

## run: dev chain, NATS, 3 validators, edge and chain-watcher on this machine
run:
	$(GO) build -o bin/devnet ./tools/devnet
	exec ./bin/devnet

## test: every test of every module, with the race detector
test:
	$(GO) test -race -count=1 -timeout 15m $(PACKAGES)

## test-short: the same without the race detector, for a quick loop
test-short:
	$(GO) test -count=1 $(PACKAGES)

## build: the three service binaries and the tools into ./bin, static and stamped with VERSION and REVISION
build:
	$(GOBUILD) $$($(GO) env GOOS) $$($(GO) env GOARCH) bin $(SERVICES) ./tools/devnet ./tools/ledgerctl ./tools/devchain/cmd/devchain

## version: the version and revision make stamps into the binaries and images
version:
	@echo $(VERSION) $(REVISION)

## release: the services and ledgerctl for linux/amd64 and linux/arm64, one archive per platform
## (binaries, LICENSE, README.md) and their SHA256SUMS in dist/VERSION/ (docs/adr/0044)
release:
	@set -e; dist=dist/$(VERSION); rm -rf $$dist; mkdir -p $$dist; \
	mtime=$$({ test -e .git && git log -1 --format=%ct; } 2>/dev/null || echo 0); \
	for platform in $(RELEASE_PLATFORMS); do \
		os=$${platform%/*}; arch=$${platform#*/}; name=contentledger-$(VERSION)-$$os-$$arch; \
		echo "== $$name"; \
		$(GOBUILD) $$os $$arch $$dist/$$name $(SERVICES) ./tools/ledgerctl; \
		cp LICENSE README.md $$dist/$$name/; \
		tar --sort=name --mtime=@$$mtime --owner=0 --group=0 --numeric-owner -C $$dist -cf - $$name | gzip -n > $$dist/$$name.tar.gz; \
		rm -r $$dist/$$name; \
	done; \
	(cd $$dist && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS)

## images: one OCI image per service and the dev chain (deployments/images), FROM scratch, with podman
## or docker; tagged $(IMAGE_PREFIX)NAME:$(IMAGE_TAG). image-NAME builds one.
images: $(addprefix image-,$(IMAGES))
	$(CONTAINER) images --filter reference='$(IMAGE_PREFIX)*:$(IMAGE_TAG)'

# The context of an image: the static binary for IMAGE_ARCH; rootfs/, root's: the build host's CA
# certificates, the non-root user's passwd and group lines, /var/lib; state/, the user's
# /var/lib/contentledger. Nothing is pulled.
$(addprefix image-,$(IMAGES)): image-%:
	@set -e; ctx=build/image-$*-$(IMAGE_ARCH); rm -rf $$ctx; mkdir -p $$ctx; \
	pkg=$$(for p in $(SERVICES) ./tools/devchain/cmd/devchain; do case $$p in */$*) echo $$p;; esac; done); \
	test -n "$$pkg" || { echo "no command named $*" >&2; exit 2; }; \
	$(GOBUILD) linux $(IMAGE_ARCH) $$ctx $$pkg; \
	mkdir -p $$ctx/rootfs/etc/ssl/certs $$ctx/rootfs/var/lib $$ctx/state/data; \
	cp $(CA_CERTS) $$ctx/rootfs/etc/ssl/certs/ca-certificates.crt; \
	cp deployments/images/passwd deployments/images/group $$ctx/rootfs/etc/; \
	$(CONTAINER) build --platform linux/$(IMAGE_ARCH) -f deployments/images/$*.Containerfile \
		--build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) --build-arg SOURCE=$(IMAGE_SOURCE) \
		-t $(IMAGE_PREFIX)$*:$(IMAGE_TAG) $$ctx

## generate: contract ABI, bytecode and Go bindings; protobuf Go code.
## Needs node/npm and protoc (Debian: protobuf-compiler); the results are committed.
generate:
	bash tools/contracts/generate.sh
	$(GO) install $(PROTOC_GEN_GO)
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc -I proto/contentledger/v1 \
		--go_out=pkg/ledgerpb --go_opt=paths=source_relative ledger.proto

## lint: go vet and golangci-lint over every module, and every go.mod tidy (make tidy fixes it)
lint:
	$(GO) vet $(PACKAGES)
	$(GO) run $(GOLANGCI) run $(PACKAGES)
	@for m in $$($(GO) list -m -f '{{.Dir}}'); do (cd $$m && $(GO) mod tidy -diff) || { echo "$$m: go.mod is not tidy; run make tidy" >&2; exit 1; }; done

## bench: every benchmark in Go's benchmark format: the package benchmarks, then the
## cluster and pipeline benchmarks below. BENCHCOUNT=6 and benchstat compare runs.
bench: bench-packages bench-cluster bench-pipeline bench-flood bench-edge bench-watcher bench-events bench-blob

## bench-packages: the package benchmarks (storage, state, transport, signing, ...)
bench-packages:
	$(GO) test -run '^$$' -bench . -skip 'BenchmarkCluster|BenchmarkPipeline|BenchmarkPaymentFlood|BenchmarkEdge|BenchmarkEvents|BenchmarkWatcher|BenchmarkBlob|BenchmarkSoak' -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) $(PACKAGES)

## bench-cluster: 3 validators against 3 etcd members (Debian's etcd-server, installed
## when missing) on loopback, 1 KiB proposals, closed-loop clients: proposals/s, p50-ms,
## p99-ms and ours/etcd. BENCH_CLIENTS=16 for one client count (default 1,16,256).
## Side by side: benchstat -filter '/system:(contentledger OR etcd)' -col /system FILE
CLUSTER_BENCHTIME ?= 5s
bench-cluster:
	$(GO) test -run '^$$' -bench BenchmarkCluster -benchtime $(CLUSTER_BENCHTIME) -count $(BENCHCOUNT) -timeout 60m ./tests/bench/

## bench-pipeline: the whole pipeline, 3 validators in TESTNET mode on the dev chain (every
## proposal paid and its payment observed before the timer), real signatures, fsync on:
## proposals/s saturated, p50/p99 at half of that, leader peak RSS. PIPELINE_COUNT proposals
## per run (each paid first).
PIPELINE_COUNT ?= 20000
bench-pipeline:
	$(GO) test -run '^$$' -bench BenchmarkPipeline -benchtime $(PIPELINE_COUNT)x -count $(BENCHCOUNT) -timeout 60m ./tests/bench/

## bench-flood: the pipeline benchmark's cluster and paid closed-loop load (64 clients) without and
## with an unpaid flood from 1,000 fresh keys, each its own client behind a trusted proxy, 1 KiB
## messages, once a second each (ignoring Retry-After), against a 256 KiB hold; and the flood alone:
## paid proposals/s, p50/p99, leader peak RSS, CPU per operation, the flood's submissions/s and
## refusals, and paid-%-of-noflood (paid throughput under the flood, % of the mean of the runs
## without it before and after). FLOOD_COUNT paid proposals (and flood submissions alone) per run;
## BENCH_FLOOD_CLIENTS, _KEYS, _MESSAGE_BYTES, _INTERVAL, _HOLD_BYTES shape it.
FLOOD_COUNT ?= 3000
bench-flood:
	$(GO) test -run '^$$' -bench BenchmarkPaymentFlood -benchtime $(FLOOD_COUNT)x -count $(BENCHCOUNT) -timeout 60m ./tests/bench/

## bench-edge: the edge in front of 3 validators (MOCK mode, idle), clients on /ops/v1/overview and
## /ops/v1/queue, closed-loop (capacity) and open-loop at fixed loads (latency at that load):
## requests/s, p50-ms, p99-ms, upstream-req/s (the edge's calls to the validators: they should not
## grow with the clients) and CPU per request. BENCH_EDGE_CLIENTS=100,1000 BENCH_EDGE_RATES=10000,20000.
EDGE_BENCHTIME ?= 3s
bench-edge:
	$(GO) test -run '^$$' -bench BenchmarkEdge -benchtime $(EDGE_BENCHTIME) -count $(BENCHCOUNT) -timeout 30m ./tests/bench/

## bench-watcher: the chain-watcher on the dev chain: logs/s publishing WATCHER_BACKFILL_COUNT
## payments already on the chain, and p50/p99 delay from a payment's block to its NATS message
## with the watcher caught up (WATCHER_LAG_COUNT payments, one after the other).
WATCHER_BACKFILL_COUNT ?= 100000
WATCHER_LAG_COUNT ?= 300
bench-watcher:
	$(GO) test -run '^$$' -bench BenchmarkWatcherBackfill -benchtime $(WATCHER_BACKFILL_COUNT)x -count $(BENCHCOUNT) -timeout 60m ./tests/bench/
	$(GO) test -run '^$$' -bench BenchmarkWatcherLag -benchtime $(WATCHER_LAG_COUNT)x -count $(BENCHCOUNT) -timeout 30m ./tests/bench/

## bench-events: the event streams of 3 validators (MOCK mode): 100 and 1,000 SSE subscribers
## spread over them while EVENTS_COUNT writes commit at BENCH_EVENTS_RATE (500/s): events/s
## delivered, p50-ms/p99-ms from sealing to delivery, dropped. BENCH_EVENTS_SUBSCRIBERS=100,1000.
EVENTS_COUNT ?= 3000
bench-events:
	$(GO) test -run '^$$' -bench BenchmarkEvents -benchtime $(EVENTS_COUNT)x -count $(BENCHCOUNT) -timeout 30m ./tests/bench/

## bench-blob: one binary (BENCH_BLOB_MIB, default 100 MiB) added to make run's IPFS node, read
## whole from the gateway directly and through a validator's /api/blob, which checks every block
## against the CID on the way (docs/adr/0037): MB/s, side by side in one run.
BLOB_BENCHTIME ?= 5x
bench-blob:
	$(GO) test -run '^$$' -bench BenchmarkBlob -benchtime $(BLOB_BENCHTIME) -count $(BENCHCOUNT) -timeout 30m ./tests/bench/

## bench-soak: 3 validators (MOCK mode, fsync on), SOAK_COUNT proposals from 64 closed-loop clients,
## about 70/20/10 writes, overwrites and deletes of their own paths, once with GC (COMPACT at every
## 1 s epoch once SOAK_GC_SIZE_DELTA segment bytes were written, default SOAK_WINDOW x 2 KiB: about
## a run per window) and once with SVC_VALIDATOR_GC_OFF: a table per SOAK_WINDOW proposals (proposals/s, p50/p99, disk per
## validator, live bytes, disk/live, leader and follower RSS, GC runs, reclaimed bytes), first and last
## window, max-disk/live, rss-growth-%, last-at-first-speed-% (the last window's proposals/s at the
## first window's machine speed, measured by the clients' CPU per proposal). Every validator's block cache is SOAK_CACHE_BYTES (128 MiB), full
## within the first window. About an hour at the default 1,000,000: not part of `bench`;
## SOAK_COUNT=20000 SOAK_WINDOW=5000 for a short run.
SOAK_COUNT ?= 1000000
SOAK_WINDOW ?= 100000
bench-soak:
	SOAK_COUNT=$(SOAK_COUNT) SOAK_WINDOW=$(SOAK_WINDOW) $(GO) test -run '^$$' -bench BenchmarkSoak -benchtime 1x -count 1 -timeout 180m ./tests/bench/

## fuzz: run each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' pkg services tools tests | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -h -o '^func Fuzz[A-Za-z0-9_]*' ./$$pkg/*_test.go | cut -d' ' -f2); do \
			echo "== $$target ($$pkg)"; \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) ./$$pkg || exit 1; \
		done; \
	done

## tidy: go mod tidy in every module
tidy:
	@for m in $$($(GO) list -m -f '{{.Dir}}'); do (cd $$m && $(GO) mod tidy) || exit 1; done
