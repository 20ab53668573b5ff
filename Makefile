# orderstatus: every target installs what it needs itself.
SHELL := /bin/bash
GO ?= go
GOFLAGS_TEST ?= -race -count=1
# The three binaries (README, "Layout"): the deployed custom handler, the
# operators' tool, and the dev kit.
BINS := bin/handler bin/orderstatus bin/orderstatus-dev
TOOLS_STAMP := tools/node_modules/.installed
GO_SOURCES := $(shell find handler -name '*.go' -not -name '*_test.go') go.mod go.sum
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# The source revision for `handler version` and orderstatus_build_info, through
# the linker: VCS stamping is off in some builds (-buildvcs=false, a tarball).
# Empty outside a git checkout; the binary then falls back to the go command's
# stamp, else "unknown".
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)

.PHONY: all build tools test test-go test-infra lint-workflows run package fmt vet clean fuzz bench soak

all: build

## build: the three binaries for this machine (CGO off, as deployed).
build: $(BINS)

bin/handler: $(GO_SOURCES)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./handler

bin/%: $(GO_SOURCES)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./handler/cmd/$*

## tools: npm packages (Azurite, the Bicep parser) into tools/node_modules.
tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): tools/package.json tools/package-lock.json
	cd tools && npm ci --no-audit --no-fund --loglevel=error
	touch $@

## test: vet, actionlint, all Go tests with -race against a real Azurite, the offline infra checks.
test: vet lint-workflows test-go test-infra

# Terse output: one line per Go package, every failure with its output, and a
# closing line per suite ("go: N passed, M failed, ..."; "infra: ..."). The full
# output is kept in .run/test-go.log and .run/test-infra.log.
test-go: tools build
	@mkdir -p .run && $(GO) build -o .run/testreport ./handler/internal/devkit/testreport
	@echo "go test $(GOFLAGS_TEST) ./... (full output: .run/test-go.log)"
	@set -o pipefail; ORDERSTATUS_REQUIRE_AZURITE=1 $(GO) test -json $(GOFLAGS_TEST) ./... 2>&1 \
	  | .run/testreport -log .run/test-go.log

test-infra: tools
	@mkdir -p .run
	@echo "node --test infra/check/ (full output: .run/test-infra.log)"
	@if [ -d infra/check ]; then node --test \
	  --test-reporter=./infra/check/lib/terse-reporter.mjs --test-reporter-destination=stdout \
	  --test-reporter=spec --test-reporter-destination=.run/test-infra.log infra/check/; fi

## lint-workflows: actionlint (fetched by the go command at ACTIONLINT_VERSION) on
## .github/workflows; fails on any finding. actionlint shell-checks run: scripts
## with shellcheck when it is on PATH; under CI (CI set) shellcheck is required.
ACTIONLINT_VERSION := v1.7.12
lint-workflows:
	@if command -v shellcheck >/dev/null 2>&1; then \
	  echo "lint-workflows: actionlint $(ACTIONLINT_VERSION), run: scripts checked with shellcheck $$(shellcheck --version | sed -n 's/^version: //p')"; \
	elif [ -n "$${CI:-}" ]; then \
	  echo "lint-workflows: shellcheck is required under CI (actionlint checks run: scripts with it)"; exit 1; \
	else \
	  echo "lint-workflows: shellcheck not on PATH: run: scripts are not shell-checked (install shellcheck to include them; CI requires it)"; \
	fi
	$(GO) run github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

## run: the whole system locally (development host, in-memory broker, Azurite).
## Pass dev-host flags with ARGS, e.g. make run ARGS="--scenario my.jsonl --exit-when-idle".
## The front's address is checked first, before tools and build install anything.
run:
	@./scripts/check-run-port.sh $(ARGS)
	@$(MAKE) --no-print-directory tools build
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
	$(GO) test ./handler/publish/outbox -run '^$$' -fuzz FuzzStatusChange -fuzztime $(FUZZTIME)
	$(GO) test ./handler/internal/dlstore/dltable -run '^$$' -fuzz FuzzDecodeEntry -fuzztime $(FUZZTIME)
	$(GO) test ./handler/tableerr -run '^$$' -fuzz FuzzBatchFailure -fuzztime $(FUZZTIME)
	$(GO) test ./handler/internal/logging -run '^$$' -fuzz FuzzLineIsSlogsLine -fuzztime $(FUZZTIME)
	$(GO) test ./handler/internal/logging -run '^$$' -fuzz FuzzNoWarnKeepsJSON -fuzztime $(FUZZTIME)
	$(GO) test ./handler/internal/clip -run '^$$' -fuzz FuzzString -fuzztime $(FUZZTIME)

## bench: the Go micro-benchmarks, then the side-by-side run of package bench
## (storage floor / naive handler / ours, locally and with 8 ms storage latency,
## ours on 4 instances with sessions moving, session slots, cold start, memory,
## CPU per message): a progress line per
## phase on stderr, `name: value` lines on stdout. Under 10 minutes.
BENCH_PACKAGES := ./handler/internal/hostproto ./handler/internal/orderstate ./handler/internal/orderfn ./handler/internal/logging ./handler/internal/store/tablestore
bench: tools build
	@echo "bench: Go micro-benchmarks ..." >&2
	ORDERSTATUS_REQUIRE_AZURITE=1 $(GO) test -run '^$$' -bench . -benchmem $(BENCH_PACKAGES)
	$(GO) run ./handler/internal/devkit/bench/cmd/bench $(BENCH_ARGS)

## soak: the simulation with thousands of schedules (SIM_SCHEDULES, default 2000;
## SIM_FIRST_SEED and SIM_PARALLEL as in make test); prints the fault-mix totals.
## Then the README walkthrough after the demo, typed a line every README_PACE (10s).
soak: tools build
	set -o pipefail; SIM_SCHEDULES=$${SIM_SCHEDULES:-2000} ORDERSTATUS_REQUIRE_AZURITE=1 \
	  $(GO) test $(GOFLAGS_TEST) -timeout 6h -run '^TestSimulation$$' -v ./handler/internal/devkit/sim/ \
	  | grep -v -E '^(=== (RUN|NAME|PAUSE|CONT) |    --- PASS: )'
	ORDERSTATUS_README_PACE=$${README_PACE:-10s} ORDERSTATUS_REQUIRE_AZURITE=1 \
	  $(GO) test -count=1 -v -run '^TestReadmeWalkthrough$$' ./handler/internal/cli/publish/

clean:
	rm -rf bin dist dist.zip .run
