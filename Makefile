# orderstatus: every target installs what it needs itself.
SHELL := /bin/bash
GO ?= go
GOFLAGS_TEST ?= -race -count=1
BIN := bin/handler
TOOLS_STAMP := tools/node_modules/.installed
GO_SOURCES := $(shell find handler -name '*.go' -not -name '*_test.go') go.mod go.sum
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: all build tools test test-go test-infra run package fmt vet clean fuzz bench soak

all: build

## build: the custom handler for this machine (CGO off, as deployed).
build: $(BIN)

$(BIN): $(GO_SOURCES)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./handler

## tools: npm packages (Azurite, the Bicep parser) into tools/node_modules.
tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): tools/package.json tools/package-lock.json
	cd tools && npm ci --no-audit --no-fund --loglevel=error
	touch $@

## test: vet, all Go tests with -race against a real Azurite, the offline infra checks.
test: vet test-go test-infra

test-go: tools build
	ORDERSTATUS_REQUIRE_AZURITE=1 $(GO) test $(GOFLAGS_TEST) ./...

test-infra: tools
	@if [ -d infra/check ]; then node --test infra/check/; fi

## run: the whole system locally (development host, in-memory broker, Azurite).
## Pass dev-host flags with ARGS, e.g. make run ARGS="--scenario my.jsonl --exit-when-idle".
run: tools build
	./scripts/run-local.sh $(ARGS)

## package: dist/ laid out as the Functions host expects, zipped to dist.zip.
package:
	rm -rf dist && mkdir -p dist/bin
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/bin/handler ./handler
	cp host.json dist/
	for f in functions/*/; do mkdir -p dist/$$(basename $$f) && cp $$f/function.json dist/$$(basename $$f)/; done
	cd dist && rm -f ../dist.zip && $(GO) run ../scripts/zipdir.go ../dist.zip .
	@echo "dist/ staged and zipped to dist.zip"

fmt:
	gofmt -w handler scripts

vet:
	@unformatted=$$(gofmt -l handler scripts); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

## fuzz: run each fuzz target for FUZZTIME (seed corpora run in make test).
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./handler/internal/hostproto -run '^$$' -fuzz FuzzDecodeInvocation -fuzztime $(FUZZTIME)
	$(GO) test ./handler/internal/hostproto -run '^$$' -fuzz FuzzDecodeServiceBus -fuzztime $(FUZZTIME)
	$(GO) test ./handler/internal/hostproto -run '^$$' -fuzz FuzzDecodeTimer -fuzztime $(FUZZTIME)
	$(GO) test ./handler/internal/order -run '^$$' -fuzz FuzzParseUpdate -fuzztime $(FUZZTIME)

## bench: the Go micro-benchmarks, then the side-by-side run of package bench
## (storage floor / naive handler / ours, locally and with 8 ms storage latency,
## session slots, cold start, memory, CPU per message): a progress line per
## phase on stderr, `name: value` lines on stdout. Under 10 minutes.
BENCH_PACKAGES := ./handler/internal/hostproto ./handler/internal/orderstate ./handler/internal/orderfn ./handler/internal/store/tablestore
bench: tools build
	@echo "bench: Go micro-benchmarks ..." >&2
	ORDERSTATUS_REQUIRE_AZURITE=1 $(GO) test -run '^$$' -bench . -benchmem $(BENCH_PACKAGES)
	$(GO) run ./handler/internal/bench/cmd/bench $(BENCH_ARGS)

## soak: the simulation with thousands of schedules (SIM_SCHEDULES, default 2000;
## SIM_FIRST_SEED and SIM_PARALLEL as in make test); prints the fault-mix totals.
soak: tools
	set -o pipefail; SIM_SCHEDULES=$${SIM_SCHEDULES:-2000} ORDERSTATUS_REQUIRE_AZURITE=1 \
	  $(GO) test $(GOFLAGS_TEST) -timeout 6h -run '^TestSimulation$$' -v ./handler/internal/sim/ \
	  | grep -v -E '^(=== (RUN|NAME|PAUSE|CONT) |    --- PASS: )'

clean:
	rm -rf bin dist dist.zip .run
