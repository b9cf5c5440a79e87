# Tide — build, test and run a local development cluster.
# `make help` lists the targets.

GO        ?= go
PREFIX    ?= /usr/local
BIN       := bin
SLURM_LINKS := sbatch squeue scancel sinfo scontrol sacct srun salloc sprio sstat
# Link Debian's libsqlite3 when its headers are there (a 5 s build instead
# of compiling the bundled SQLite for over a minute).
SQLITE_TAG := $(shell test -f /usr/include/sqlite3.h && echo libsqlite3)
GOTAGS    ?= $(SQLITE_TAG)
export CGO_ENABLED := 1
export CGO_CFLAGS  ?= -O2 -g -Wno-deprecated-declarations
GOFLAGS_BUILD := -tags '$(GOTAGS)' -trimpath
TEST_TIMEOUT ?= 20m
# Non-empty when PostgreSQL's server binaries are where internal/pgtest
# looks (TIDE_PG_BIN, else Debian's /usr/lib/postgresql/*/bin, else
# PATH): make test then runs the integration tests on that store too.
PG_INSTALLED := $(shell d="$$TIDE_PG_BIN"; for c in $${d:-/usr/lib/postgresql/*/bin $$(command -v postgres | xargs -r dirname)}; do [ -x "$$c/initdb" ] && [ -x "$$c/postgres" ] && { echo yes; break; }; done)
# The packages whose code runs goroutines and whose tests exercise them:
# the controller and its client, tided and the step supervisor, the
# step stream protocol, the MUNGE client, salloc, and the store under
# concurrent writers, and srun's step streams. make test runs their
# tests a second time under the race detector (which needs cgo, on above).
RACE_PKGS ?= ./ctld/ ./ctld/client/ ./noded/ ./noded/stepd/ ./noded/steps/ ./noded/runtime/ ./ctld/state/ ./internal/stepio/ ./internal/munge/ ./cli/salloc/ ./cli/srun/ ./accounting/

.PHONY: help build test test-gpu test-short bench bench-go bench-vs-slurm up down demo conformance lint fmt vet install clean tidy cover

help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build bin/tide, bin/tide-sim, bin/tidectld, bin/tided, bin/tide-stepd and the Slurm-named links
	@mkdir -p $(BIN)
	@if [ -x $(BIN)/tidectld ]; then echo "== building $(BIN)/: tidectld tided tide-stepd tide tide-sim"; \
	else echo "== building $(BIN)/: tidectld tided tide-stepd tide tide-sim (the first build takes a few minutes)"; fi
	@# The supervisor uses cgo to fork jobs without a /bin/sh trampoline
	@# (noded/stepd/spawn_cgo.go); it runs once per node, so its start
	@# does not matter.
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN)/.build/ ./cmd/tidectld ./cmd/tided ./cmd/tide-stepd
	@# The CLI needs no cgo: a static binary starts in half the time, and
	@# every sbatch and squeue pays that start.
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/.build/ ./cmd/tide ./cmd/tide-sim
	@# Copied into place, as make install and packages do: every run of
	@# a file just written by the Go linker (through mmap) took 0.15 to
	@# 0.35 ms longer on the reference VM than a run of a copy of it
	@# (the same number of page faults, each dearer: how the page cache
	@# holds the file), and a loop of sbatch pays that each time.
	@install -m 0755 $(addprefix $(BIN)/.build/,tidectld tided tide-stepd tide tide-sim) $(BIN)/
	@for l in $(SLURM_LINKS); do ln -sf tide $(BIN)/$$l; done

# The tests run through test/tools/testprogress: a line per package as it
# finishes, a line every 30 s while one runs long (the integration tests)
# or while the first build goes on, the output of failed tests only, and a
# summary. TESTV=1 runs plain go test instead (its own output, as before).
TESTPROGRESS := $(GO) run ./test/tools/testprogress --
GOTEST = $(if $(TESTV),$(GO) test,$(TESTPROGRESS) $(GO) test -json)

test: ## vet, unit and integration tests (real daemons on loopback), the concurrent packages (RACE_PKGS) again under -race, then the integration tests again with every host in a network namespace of its own (as root), and again on the PostgreSQL store (when installed); TESTV=1: go test's own output
	@echo "== go vet ./... (it compiles every package first: a few minutes on a first build)"
	$(GO) vet -tags '$(GOTAGS)' ./...
	@echo "== unit and integration tests, package by package (the integration tests build the binaries first and run for minutes)"
	$(GOTEST) -tags '$(GOTAGS)' -count=1 -timeout $(TEST_TIMEOUT) ./...
	@echo "== the concurrent packages again under the race detector (RACE_PKGS; it rebuilds them: minutes)"
	$(GOTEST) -race -tags '$(GOTAGS)' -count=1 -timeout $(TEST_TIMEOUT) $(RACE_PKGS)
	@# The second pass: the controller, a login node and each node in a
	@# network namespace of its own, the commands on the login node over
	@# TCP with MUNGE (test/integration/hosts_test.go). It needs root,
	@# iproute2, util-linux and munge, which CI has.
	@if [ "$$(id -u)" = 0 ] && command -v ip >/dev/null && command -v nsenter >/dev/null; then \
	  echo "== integration tests, netns mode (TIDE_IT_HOSTS=netns)"; \
	  TIDE_IT_HOSTS=netns $(GOTEST) -tags '$(GOTAGS)' -count=1 -timeout $(TEST_TIMEOUT) ./test/integration/; \
	else echo "== skipping the netns pass of the integration tests: it needs root, ip (iproute2) and nsenter (util-linux)"; fi
	@# The third pass: the same tests with every test controller on a
	@# PostgreSQL database of its own in a private server the test
	@# binary starts and stops (internal/pgtest; TIDE_TEST_STORE in
	@# test/integration/harness_test.go). The store's own tests run on
	@# both in the first phase already.
	@if [ -n "$(PG_INSTALLED)" ]; then \
	  echo "== integration tests on the PostgreSQL store (TIDE_TEST_STORE=postgres)"; \
	  TIDE_TEST_STORE=postgres $(GOTEST) -tags '$(GOTAGS)' -count=1 -timeout $(TEST_TIMEOUT) ./test/integration/; \
	else echo "== skipping the PostgreSQL pass of the integration tests: PostgreSQL is not installed (Debian: apt-get install postgresql)"; fi

test-gpu: build ## on a machine with an NVIDIA GPU: NVML discovery against the driver, then scripts/gpu-check.sh
	$(GO) test -tags '$(GOTAGS)' -count=1 ./gres/nvml/ -gpu -v -run Real
	./scripts/gpu-check.sh

test-short: ## unit tests only
	@echo "== unit tests, package by package (-short)"
	$(GOTEST) -tags '$(GOTAGS)' -short -count=1 ./...

.PHONY: chaos
chaos: ## soak test: mixed load on a local cluster while tidectld and tided are killed -9 at random (DURATION=10m; CONTROLLERS=3: standby controllers on PostgreSQL, primaries also paused past their lease)
	TIDE_CHAOS_DURATION=$(or $(DURATION),10m) TIDE_CHAOS_CONTROLLERS=$(or $(CONTROLLERS),$(TIDE_CHAOS_CONTROLLERS)) $(GO) test -tags '$(GOTAGS)' -count=1 -timeout 0 -v -run '^TestChaos$$' ./test/integration/

bench: build ## scheduler and store benchmarks plus the local-cluster benchmark table
	./scripts/bench.sh

bench-go: ## Go benchmarks only
	$(GO) test -tags '$(GOTAGS)' -run '^$$' -bench . -benchmem ./ctld/sched/ ./ctld/ ./accounting/ ./cli/squeue/

FUZZTIME  ?= 30s
FUZZFLAGS ?=

# A target that stops with "context deadline exceeded" at the end of
# FUZZTIME and saved no failing input hit Go's own race in ending a
# timed run (go.dev/issue/75804, fixed in Go 1.27), not a finding: it
# counts as passed, marked "ok*".
.PHONY: fuzz
fuzz: ## run every Go fuzz target for FUZZTIME (default 30s) in turn, then a summary; FUZZFLAGS=-parallel=1 uses one core
	@fail=0; summary=""; \
	dirs=$$(git ls-files -co --exclude-standard '*_test.go' | xargs grep -l '^func Fuzz' | xargs -n1 dirname | sort -u); \
	for d in $$dirs; do \
	  targets=$$($(GO) test -tags '$(GOTAGS)' -list '^Fuzz' ./$$d | grep '^Fuzz') || { summary="$$summary  FAIL ./$$d (does not build)\n"; fail=1; continue; }; \
	  for t in $$targets; do \
	    echo "== ./$$d $$t"; \
	    n0=$$(ls $$d/testdata/fuzz/$$t 2>/dev/null | wc -l); log=$$(mktemp); \
	    { $(GO) test -tags '$(GOTAGS)' -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./$$d; echo $$? > $$log.rc; } 2>&1 | tee $$log; \
	    n1=$$(ls $$d/testdata/fuzz/$$t 2>/dev/null | wc -l); \
	    if [ "$$(cat $$log.rc)" = 0 ]; then r="ok  "; \
	    elif [ "$$n1" = "$$n0" ] && grep -q '^    context deadline exceeded$$' $$log; then r="ok* "; \
	    else r="FAIL"; fail=1; fi; \
	    rm -f $$log $$log.rc; summary="$$summary  $$r ./$$d $$t\n"; \
	  done; \
	done; \
	printf "\nfuzz summary (FUZZTIME=$(FUZZTIME); ok* = stopped by Go's fuzztime race, go.dev/issue/75804, without a failing input;\nfailing inputs are saved under <package>/testdata/fuzz/<target>/ and then run with make test):\n$$summary"; \
	exit $$fail

bench-vs-slurm: build ## the same measurements against the reference Slurm, side by side
	./scripts/bench-vs-slurm.sh

.PHONY: bench-scale
bench-scale: build ## the whole controller at scale: one tided emulating BENCH_NODES nodes (2000) and BENCH_PENDING pending jobs (20000), a table against issue 26's targets
	./scripts/bench-scale.sh

.PHONY: bench-scale-slurm
bench-scale-slurm: build ## bench-scale side by side with the reference Slurm (as root; installs slurm-wlm): scripts/bench-scale-slurm.sh at BENCH_NODES slurmd, then bench-scale.sh with a Slurm column and the ratios
	BENCH_SLURM_RESULTS=$${BENCH_SLURM_RESULTS:-bench-results/slurm-scale.txt} ./scripts/bench-scale-slurm.sh
	BENCH_SLURM_RESULTS=$${BENCH_SLURM_RESULTS:-bench-results/slurm-scale.txt} ./scripts/bench-scale.sh

up: build ## start tidectld and four tided (gpu[01-04]) under ./run (again: restart only what died), wait until they respond
	./scripts/up.sh

down: ## stop exactly the daemons `make up` started
	./scripts/down.sh

demo: up ## start the local cluster, run the examples, show squeue, sinfo and sacct
	@echo "== the demo: examples/*.sh on the local cluster, then squeue, sinfo and sacct (scripts/demo.sh)"
	./scripts/demo.sh

# Not part of make test: CI cannot fetch Slurm's sources.
conformance: ## Slurm's testsuite/python (SLURM_SRC=<dir holding testsuite/python>) against a fresh local cluster, then the pass table
	@if [ -z "$(SLURM_SRC)" ]; then \
	  echo "make conformance: set SLURM_SRC to the directory that holds Slurm's testsuite/python" >&2; \
	  echo "  (git -C <slurm mirror> archive <tag> testsuite | tar -x -C DIR; make conformance SLURM_SRC=DIR)" >&2; \
	  exit 2; fi
	@if [ ! -f "$(SLURM_SRC)/testsuite/python/lib/atf.py" ]; then \
	  echo "make conformance: SLURM_SRC=$(SLURM_SRC) holds no testsuite/python/lib/atf.py" >&2; exit 2; fi
	$(MAKE) build
	SLURM_SRC='$(SLURM_SRC)' ./scripts/conformance.sh $(CONFORMANCE_ARGS)

lint: ## gofmt, go vet, the import rules (internal/layers; and staticcheck when installed)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags '$(GOTAGS)' ./...
	$(GO) test -tags '$(GOTAGS)' -count=1 ./internal/layers/
	@if command -v staticcheck >/dev/null; then staticcheck -tags '$(GOTAGS)' ./...; fi

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')

cover: ## test coverage summary
	$(GO) test -tags '$(GOTAGS)' -short -cover ./...

tidy: ## go mod tidy
	$(GO) mod tidy

# The manual pages are generated from the option tables the commands'
# parsers read, the daemons' flags and the configuration loaders' keys
# (internal/mangen), so they cannot drift from the programs.
MANDIR := $(BIN)/man
.PHONY: man
man: ## write the manual pages (sbatch.1 ... tide.1, tidectld.8, tided.8, tide.yaml.5) under bin/man; try one with man -l bin/man/man1/sbatch.1
	@echo "== writing the manual pages under $(MANDIR)/"
	$(GO) run -tags '$(GOTAGS)' ./cmd/gen-man -dir $(MANDIR) -src .

install: build man ## install binaries, links, manual pages, shell completion, example configs and systemd units under PREFIX
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/etc/tide $(DESTDIR)$(PREFIX)/lib/systemd/system
	install -m 0755 $(BIN)/tide $(BIN)/tide-sim $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BIN)/tidectld $(BIN)/tided $(BIN)/tide-stepd $(DESTDIR)$(PREFIX)/sbin/
	@for l in $(SLURM_LINKS); do ln -sf tide $(DESTDIR)$(PREFIX)/bin/$$l; done
	@# Existing configs are kept: a reinstall must not reset a cluster.
	@for f in tide.yaml tided.yaml; do \
	  if [ -e $(DESTDIR)$(PREFIX)/etc/tide/$$f ]; then echo "keeping existing $(PREFIX)/etc/tide/$$f"; \
	  else install -m 0644 etc/$$f $(DESTDIR)$(PREFIX)/etc/tide/$$f; fi; done
	install -d $(DESTDIR)$(PREFIX)/share/doc/tide
	install -m 0644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/tide/
	sed 's|@PREFIX@|$(PREFIX)|g' etc/systemd/tidectld.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/tidectld.service
	sed 's|@PREFIX@|$(PREFIX)|g' etc/systemd/tided.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/tided.service
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 $(MANDIR)/man1/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 $(MANDIR)/man5/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 $(MANDIR)/man8/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	@# Shell completion. bash-completion loads a command's script by the
	@# command's name, so each link gets the name too (tide's script
	@# covers them all); zsh binds every name on _tide's #compdef line.
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	$(BIN)/tide completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/tide
	@for l in $(SLURM_LINKS); do ln -sf tide $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$l; done
	$(BIN)/tide completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_tide

clean: ## remove build outputs (not ./run)
	rm -rf $(BIN)
