# sandboxcore — see README.md. Every target works on a fresh machine with Go,
# git and this repository. A recipe longer than a few lines of shell is a
# script under scripts/ (its header names the target); the variables it
# needs are passed to it on its command line.
GO        ?= go
BIN       := bin
# Packages whose tests link the embedded Temporal server (slow to build: no
# -race, so the server is compiled once, without the race detector).
E2E_PKGS  := ./tests/... ./internal/hostworker/...
UNIT_PKGS  = $(shell $(GO) list ./... | grep -v -e '/tests' -e '/internal/hostworker' -e '/internal/devserver' -e '/internal/stackserver' -e '/worker$$')
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all help build run runtime-deps python-venv test-python python-models bench-python test test-unit test-e2e test-e2e-docker test-e2e-e2b test-e2e-daytona test-compose stack-images fuzz bench bench-scale lint fmt clean up down schema

# The production stack (docker-compose.yaml, docs/PRODUCTION.md): Compose v2
# (`docker compose`) when present, else the standalone `docker-compose`.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

all: build ## the default: make build

# `make help`: every target with the `## ` description on its line.
help: ## this list
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-17s %s\n", $$1, $$2}'

# -v lists each package as it is compiled (nothing once the build cache is
# warm), so the first build, which compiles the embedded Temporal server
# and takes minutes, shows its progress instead of staying silent.
build: ## bin/sandbox-worker, bin/sandboxctl and bin/sandbox-supervisor (static: it runs inside runtimes)
	@echo "make build: compiling bin/sandbox-worker (the first build compiles the embedded Temporal server and its UI: several minutes; each package is listed as it compiles)" >&2
	$(GO) build -v -o $(BIN)/sandbox-worker ./worker
	@echo "make build: compiling bin/sandboxctl" >&2
	$(GO) build -v -o $(BIN)/sandboxctl ./starter
	@echo "make build: compiling bin/sandbox-supervisor" >&2
	CGO_ENABLED=0 $(GO) build -v -o $(BIN)/sandbox-supervisor ./supervisor
	@echo "make build: done ($(BIN)/)" >&2

# The main job on the embedded default: Temporal dev server + Web UI, SQLite
# store, data under $SANDBOX_DATA_DIR (default ./.sandboxcore). file:// URLs are
# allowed so the README walkthrough can use this repository itself.
run: build runtime-deps ## build, then a worker on the embedded default: Temporal dev server + Web UI, SQLite, ./.sandboxcore
	SANDBOX_DATA_DIR=$${SANDBOX_DATA_DIR:-$(CURDIR)/.sandboxcore} \
	SANDBOX_ALLOW_FILE_URLS=$${SANDBOX_ALLOW_FILE_URLS:-1} \
	./$(BIN)/sandbox-worker

# The isolated local runtime make run uses, and git-lfs (host-side Git LFS
# fetches): install them with apt when missing and we may (root on Debian);
# otherwise say how (scripts/runtime-deps.sh).
runtime-deps: ## bubblewrap and git-lfs: installed with apt when missing (as root), else say how
	@scripts/runtime-deps.sh

# runtime-deps first: the end-to-end hosts use the isolated runtime (auto =
# bubblewrap), exactly as make run does.
test: runtime-deps test-unit test-e2e test-e2e-docker test-e2e-e2b test-e2e-daytona test-python fuzz ## the whole suite (what CI runs)

# The Python SDK (python/, README "Use it from Python"): a venv with the pinned
# versions of python/constraints.txt and the package installed editable; then
# ruff, mypy and pytest against a real worker (bin/, embedded Temporal).
PYTHON ?= python3
VENV   := python/.venv
python-venv: $(VENV)/.installed ## python/.venv: the Python SDK, editable, with the pins of python/constraints.txt
$(VENV)/.installed: python/pyproject.toml python/constraints.txt
	@PYTHON='$(PYTHON)' scripts/need-python-venv.sh
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -c python/constraints.txt -e 'python[test]'
	touch $@

test-python: build python-venv ## the Python SDK: ruff, mypy, and pytest against a real worker
	cd python && .venv/bin/ruff format --check . && .venv/bin/ruff check . && .venv/bin/mypy
	cd python && SANDBOX_BIN_DIR=$(CURDIR)/$(BIN) .venv/bin/pytest -q -p no:cacheprovider

# The Python SDK's latency against the Go SDK's, in one run (docs/BENCHMARKS.md
# "Python SDK"); part of make bench.
bench-python: build python-venv ## the Python SDK's latency against the Go SDK's (part of make bench)
	SANDBOX_BIN_DIR=$(CURDIR)/$(BIN) $(VENV)/bin/python python/bench/bench_sdk.py

# Regenerate python/src/sandboxcore/models.py from docs/schema (after make schema).
python-models: python-venv ## regenerate the Python SDK's models.py and tools.json from docs/schema
	$(VENV)/bin/python python/scripts/generate_models.py
	cp docs/schema/tools.json python/src/sandboxcore/tools.json

test-unit: ## go vet, then the unit tests with -race (every package but the end-to-end ones)
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m $(UNIT_PKGS)

# The Daytona end-to-end tests (TestDaytona*) run in test-e2e-daytona only;
# the E2B ones start their own fake E2B here (TestE2BVendorSDK: E2B's own
# SDK against it, docs/DESIGN.md "Remote stand-ins").
test-e2e: ## the end-to-end tests on an embedded Temporal (not the Daytona ones)
	$(GO) test -count=1 -timeout 30m -skip '$(DAYTONA_TESTS)' $(E2E_PKGS)

# The main job's end-to-end tests again with SANDBOX_RUNTIME_PROVIDER=docker,
# on the image .ci/test-image.sh builds; skipped without a daemon
# or that image, except under CI=true (scripts/test-e2e-docker.sh).
TEST_IMAGE     ?= sandboxcore-test:latest
MAIN_JOB_TESTS := ^(TestAcquireIsIdempotentAndConversationsAreIsolated|TestExecSemantics|TestFilesAreConfinedToTheWorktree|TestDiffAndCommit|TestAnalysisWorkspaceIsReadOnly|TestResumeAfterTheSessionRunCompleted|TestReleaseAndHibernateKeepTheWorkspace|TestCLIWalkthrough)$$
# Background processes and cancel need a runtime with processes
# (sandbox.ProcessRuntime: bubblewrap, Docker, local); the remote runtimes
# (E2B, Daytona) have none, so these run again on Docker only.
PROCESS_TESTS  := ^(TestProcessServerReachedFromALaterExec|TestProcessPTYShellAnswers|TestExecCancel|TestCLIExecCtrlCKillsTheTree)$$
# Prepared trees are hard-linked read-only into the worktree of a runtime
# that mounts it (bubblewrap, Docker, local), and Docker runs the image a
# repository names: on Docker again.
HOST_MOUNT_TESTS := ^(TestPreparedTreeSkipsSetup|TestRepositoryImageOnDocker)$$
test-e2e-docker: ## the main job's end-to-end tests again on the Docker runtime (needs the test image)
	@GO='$(GO)' TEST_IMAGE='$(TEST_IMAGE)' MAIN_JOB_TESTS='$(MAIN_JOB_TESTS)' PROCESS_TESTS='$(PROCESS_TESTS)' \
	  HOST_MOUNT_TESTS='$(HOST_MOUNT_TESTS)' scripts/test-e2e-docker.sh

# The main job's end-to-end tests again with SANDBOX_RUNTIME_PROVIDER=e2b
# against the E2B stand-in (internal/runtime/e2b/e2bfake: its sandboxes are
# containers of the test image), started here and stopped after; skipped
# without a daemon or that image, except under CI=true
# (scripts/test-e2e-e2b.sh).
E2BFAKE := $(BIN)/e2bfake
test-e2e-e2b: ## the main job's end-to-end tests again on the E2B runtime, against the fake E2B
	@GO='$(GO)' TEST_IMAGE='$(TEST_IMAGE)' MAIN_JOB_TESTS='$(MAIN_JOB_TESTS)' E2BFAKE='$(E2BFAKE)' \
	  scripts/test-e2e-e2b.sh

# The main job's end-to-end tests again with SANDBOX_RUNTIME_PROVIDER=daytona,
# plus the Daytona ones (replica recreated, orphans, quota, previews;
# TestDaytonaVendorSDK: Daytona's own SDK against a fake of its own,
# docs/DESIGN.md "Remote stand-ins"), against the fake Daytona the test
# binary starts (README "Daytona"; each sandbox a container of
# $(TEST_IMAGE)); skipped without a daemon or that image, except under
# CI=true (scripts/test-e2e-daytona.sh).
DAYTONA_TESTS := ^TestDaytona
test-e2e-daytona: ## the main job's and the Daytona end-to-end tests on the Daytona runtime, against the fake Daytona
	@GO='$(GO)' TEST_IMAGE='$(TEST_IMAGE)' MAIN_JOB_TESTS='$(MAIN_JOB_TESTS)' DAYTONA_TESTS='$(DAYTONA_TESTS)' \
	  scripts/test-e2e-daytona.sh

# The smoke check of a remote runtime against the real service, when its
# key is set (skipped with a message otherwise; not part of make test):
# the step before trusting a new service version (docs/PRODUCTION.md;
# scripts/smoke.sh).
.PHONY: smoke-daytona smoke-e2b
smoke-daytona: ## the Daytona adapter's smoke check against the real Daytona (DAYTONA_API_KEY; skipped without)
	@GO='$(GO)' scripts/smoke.sh daytona
smoke-e2b: ## the E2B adapter's smoke check against the real E2B (E2B_API_KEY; skipped without)
	@GO='$(GO)' scripts/smoke.sh e2b

# Each fuzz target for a fixed number of executions, not a duration
# (seed corpora under testdata/fuzz; scripts/fuzz.sh says why).
# FUZZSCALE multiplies every count.
FUZZSCALE ?= 1
fuzz: ## each fuzz target for a fixed number of executions (FUZZSCALE=n multiplies them)
	@GO='$(GO)' FUZZSCALE='$(FUZZSCALE)' scripts/fuzz.sh

bench: bench-python ## latency benchmarks against raw git / fork-exec, recorded in docs/BENCHMARKS.md
	$(GO) test -run '^$$' -bench . -benchtime 20x -count 1 -timeout 30m ./tests/
	$(GO) test -run '^$$' -bench . -benchtime 20x -count 1 -timeout 30m ./internal/runtime/bwrap/ ./internal/runtime/docker/ ./internal/runtime/supervisor/
	$(GO) test -run '^$$' -bench . -benchtime 10x -count 1 -timeout 30m ./internal/runtime/daytona/
	$(GO) test -run '^$$' -bench . -benchtime 20x -count 1 ./internal/eviction/
	$(GO) test -run '^$$' -bench . -benchtime 30x -count 1 -timeout 30m ./internal/workspace/
	$(GO) test -run '^$$' -bench . -benchtime 200x -count 1 ./payloadcodec/
	$(GO) test -run '^$$' -bench . -benchtime 300x -count 1 ./internal/egress/
	$(GO) test -run '^$$' -bench . -benchtime 2000x -count 1 ./internal/wire/
	$(GO) test -run '^$$' -bench . -benchtime 10x -count 1 -timeout 30m ./internal/runtime/e2b/

# One host at scale (docs/BENCHMARKS.md "Scale"; not part of make test or
# make bench): SESSIONS new edit workspaces acquired and kept open by
# ACQUIRERS clients, then EXEC_CLIENTS clients each running EXECS execs, and
# an eviction run over EVICT open workspaces. The defaults take ≈ 25 minutes
# on a 2-core machine (the 15-minute goal is not met there; BENCHMARKS.md);
# smaller figures for a shared machine: make bench-scale SESSIONS=2000 EVICT=300.
SESSIONS ?= 10000
ACQUIRERS ?= 16
EXEC_CLIENTS ?= 50
EXECS ?= 20
EVICT ?= 1000
bench-scale: ## one host at scale: SESSIONS, ACQUIRERS, EXEC_CLIENTS, EXECS, EVICT (not in make bench)
	SANDBOX_BENCH_SCALE=1 SANDBOX_BENCH_SESSIONS=$(SESSIONS) SANDBOX_BENCH_ACQUIRERS=$(ACQUIRERS) \
	  SANDBOX_BENCH_EXEC_CLIENTS=$(EXEC_CLIENTS) SANDBOX_BENCH_EXECS=$(EXECS) SANDBOX_BENCH_EVICT=$(EVICT) \
	  $(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -count 1 -timeout 60m ./tests/

# The JSON Schema of the wire contract (docs/schema/, docs/API.md "Schema"),
# generated from package sandboxapi; internal/schema's test fails when the
# committed files are stale.
schema: ## regenerate the JSON Schema of the wire contract (docs/schema/) from sandboxapi
	$(GO) run ./internal/schema/schemagen -api ./sandboxapi -out docs/schema

lint: ## go vet, staticcheck, gofmt -l
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

fmt: ## gofmt -w every Go file
	gofmt -w $$(git ls-files '*.go')

up: ## PostgreSQL, Temporal (PostgreSQL persistence), Temporal UI and the worker image, detached
	$(COMPOSE) up -d --build

down: ## stop the stack (volumes kept; `docker compose down -v` also deletes the databases)
	$(COMPOSE) down

# The production stack without a registry (docs/PRODUCTION.md "Without a
# registry"): the image every service runs, built locally.
stack-images: ## the production stack's images, built locally without a registry
	bash deploy/local/build-images.sh

# The production stack started for real from those images, driven end to end
# through its Temporal frontend (acquire, exec, write, commit), its Web UI and
# Prometheus checked, then brought down (.ci/test-compose.sh; run by .ci/run).
test-compose: ## the production stack from those images, started, driven end to end, brought down
	bash .ci/test-compose.sh

clean: ## remove bin/
	rm -rf $(BIN)
