# gpusched — see README.md. `make demo` and `make test` are the two entry points.
GO       ?= go
BIN      := bin
# Packages that run goroutines are tested under the race detector
# (placement's policies and simulator run on one goroutine: of placement,
# its zooapps, which builds models' profiles concurrently, is, and the
# cluster benchmark's tests, which run simulations side by side).
RACE_PKGS := ./actors/... ./transport/... ./cluster-test/... ./cmd/... ./tensorsched/... ./placement/zooapps/...
RACE_PLACEMENT := ClusterBench
BENCHTIME ?= 1x

.PHONY: all build test test-race vet fmt-check bench demo proto fuzz clean

all: build

build:
	$(GO) build -o $(BIN)/coordinator ./cmd/coordinator
	$(GO) build -o $(BIN)/node ./cmd/node

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# test: formatting, vet, every package's tests, and the race detector on the
# packages that use goroutines. Kept under 15 minutes on a 2-core machine.
test: fmt-check vet build
	$(GO) test -count=1 -timeout 12m ./...
	$(GO) test -race -count=1 -timeout 12m $$($(GO) list $(RACE_PKGS) 2>/dev/null)
	$(GO) test -race -count=1 -timeout 5m -run '$(RACE_PLACEMENT)' ./placement/

# bench: every Go benchmark, printed as tables by `go test -bench`.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./...

# fuzz: a short run of each fuzz target (the seed corpus also runs in `make test`).
fuzz:
	$(GO) test ./workload -run '^$$' -fuzz FuzzParseSpec -fuzztime 30s
	$(GO) test ./workload -run '^$$' -fuzz FuzzParseTrace -fuzztime 30s -fuzzminimizetime 50x
	$(GO) test ./placement -run '^$$' -fuzz FuzzLoadWorkload -fuzztime 30s
	$(GO) test ./placement -run '^$$' -fuzz FuzzLoadApp -fuzztime 30s
	$(GO) test ./placement -run '^$$' -fuzz FuzzArbitrateNeverExceedsCapacity -fuzztime 30s
	$(GO) test ./placement -run '^$$' -fuzz FuzzParseONESTuning -fuzztime 30s
	$(GO) test ./placement -run '^$$' -fuzz FuzzSimulateRandomWorkload -fuzztime 30s
	$(GO) test ./cmd/coordinator -run '^$$' -fuzz FuzzFormatProgress -fuzztime 30s
	$(GO) test ./actors -run '^$$' -fuzz FuzzSubmitRequest -fuzztime 30s
	$(GO) test ./tensorsched -run '^$$' -fuzz FuzzPlanTensileRandomGraph -fuzztime 30s
	$(GO) test ./tensorsched -run '^$$' -fuzz FuzzPlanJobsRandomGraphs -fuzztime 30s
	$(GO) test ./tensorsched -run '^$$' -fuzz FuzzMinBudgetIsMet -fuzztime 30s
	$(GO) test ./tensorsched/fikit -run '^$$' -fuzz FuzzSimulateRandomJobs -fuzztime 30s
	$(GO) test ./tensorsched/fikit -run '^$$' -fuzz FuzzSimulateRejectsInvalidInput -fuzztime 30s
	$(GO) test ./tensorsched/fikit -run '^$$' -fuzz FuzzProfilerArithmetic -fuzztime 30s

# proto: regenerate actors/pb from proto/*.proto with a pinned protoc-gen-go
# (protoc itself: apt-get install protobuf-compiler; generated with 3.21.12).
PROTOC_GEN_GO_VERSION := v1.36.12
proto:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	protoc --plugin=protoc-gen-go=$$($(GO) env GOPATH)/bin/protoc-gen-go --go_out=. --go_opt=module=github.com/gpusched/gpusched proto/*.proto

demo: build
	./$(BIN)/coordinator demo

clean:
	rm -rf $(BIN)
