# jobq — make help lists the targets.
GO        ?= go
BIN       := bin/jobq
PKGS      := ./...
export GOFLAGS ?=

.PHONY: help build build-testbed demo test sdk-test test-deps mutants generate verify lint bench chaos fuzz ensure-db ensure-browser vendor clean

help: ## List targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' \
		'{n[NR]=$$1; d[NR]=$$2; if (length($$1) > w) w = length($$1)} END {for (i = 1; i <= NR; i++) printf "  make %-*s  %s\n", w, n[i], d[i]}'

build: ## Build bin/jobq.
	$(GO) build -o $(BIN) ./cmd/jobq

TESTBED_BIN := bin/jobq-testbed

build-testbed: ## Build bin/jobq-testbed: bin/jobq plus the testbed-only --sabotage switches (go build -tags testbed).
	$(GO) build -tags testbed -o $(TESTBED_BIN) ./cmd/jobq

ensure-db: ## Make sure a MySQL-compatible server can be provided (installs mariadb-server as root if none).
	@scripts/ensure-db.sh

ensure-browser: ## Make sure the console's browser test can run: Debian's chromium, pinned playwright-core (console/e2e).
	@scripts/ensure-browser.sh

HTMX_VERSION = $(shell node -p "require('./console/vendor/package-lock.json').packages['node_modules/htmx.org'].version")

vendor: ## Re-vendor the console's htmx.min.js from the npm registry at the version pinned in console/vendor/package-lock.json.
	cd console/vendor && npm ci --no-audit --no-fund --loglevel=error
	cp console/vendor/node_modules/htmx.org/dist/htmx.min.js console/static/htmx.min.js
	@grep -q 'version:"$(HTMX_VERSION)"' console/static/htmx.min.js && echo "vendor: console/static/htmx.min.js is htmx $(HTMX_VERSION)"

demo: ensure-db build ## Run the demo: 3 replicas, 1,000 jobs, one SIGKILL, narrated; verdict line; fails on a lost or stuck job or a duplicated tx effect.
	$(BIN) demo

test-deps: ## Find or install what the tests need (scripts/test-deps.sh: MariaDB, Galera, Prometheus, node, browser); says what it installed.
	@scripts/test-deps.sh

# TESTFORMAT is gotestsum's --format: testname prints each test (package.Test,
# PASS/FAIL, time) as it ends; dots, pkgname or standard-verbose also work.
TESTFORMAT ?= testname
TESTFLAGS  ?= -race -count=1 -timeout 40m

test: test-deps ## Run every test with -race against a real server, then the store's tests again in the MySQL dialect (JOBQ_FORCE_MYSQL_DIALECT=1); gotestsum.
	$(GO) tool gotestsum --format $(TESTFORMAT) --format-hide-empty-pkg -- $(TESTFLAGS) $(PKGS)
	JOBQ_FORCE_MYSQL_DIALECT=1 $(GO) tool gotestsum --format $(TESTFORMAT) --format-hide-empty-pkg -- $(TESTFLAGS) ./store/

sdk-test: test-deps ## Run the worker protocol's conformance suite alone: Go library, jobq work, Python, Node, Java workers vs a real replica (TestConformance/<impl>/<rule>).
	$(GO) tool gotestsum --format $(TESTFORMAT) -- -count=1 -timeout 10m -run '^TestConformance$$' ./sdk/conformance/

mutants: ensure-db ## Plant each known bug (testbed/mutants) in a temp worktree of HEAD, run the tests that must catch it, print caught/survived (not in CI).
	$(GO) run ./testbed/mutants

generate: ## Regenerate gen/ from sql/ with sqlc and from api/ with buf (both pinned in go.mod).
	$(GO) tool sqlc -f sql/sqlc.yaml generate
	$(GO) tool buf generate

verify: ## Fail on sqlc or buf drift, buf lint/format, gofmt or go vet findings.
	$(GO) tool sqlc -f sql/sqlc.yaml diff
	$(GO) tool buf lint
	$(GO) tool buf format --diff --exit-code
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && $(GO) tool buf generate -o "$$tmp" && \
		diff -r "$$tmp/gen/jobq" gen/jobq || (echo "buf: gen/jobq differs from api/; run make generate" >&2; exit 1)
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt: files above need formatting" >&2; exit 1)
	$(GO) vet $(PKGS)

lint: verify ## Alias of verify.

clean: ## Remove build output.
	rm -rf bin out

# loadtest: open-model submit load through the HTTP API (docs/bench.md).
LOADTEST_STAGES     ?= 50:10s,100:10s,200:10s
LOADTEST_THRESHOLDS ?= --threshold 'pickup.p99<1s' --threshold 'errors.rate<0.001'
LOADTEST_CAPACITY   ?= --capacity --capacity-threshold 'pickup.p99<250ms' --capacity-threshold 'errors.rate<0.001' \
	--capacity-trial 5s --capacity-trials 8

.PHONY: loadtest
loadtest: ensure-db build ## 30 s submit ramp over 3 replicas: CO-free spectrum, thresholds, capacity search (out/loadtest/).
	$(BIN) loadtest --replicas 3 --stages $(LOADTEST_STAGES) $(LOADTEST_THRESHOLDS) $(LOADTEST_CAPACITY)

# chaos: the HA and exactly-once testbed (docs/chaos.md).
CHAOS_FLAGS ?= --jobs 2000 --duration 30s --seed 42

.PHONY: chaos-sabotage
chaos: ensure-db build ## Run every standard chaos scenario (3 replicas, faults, checker; four of them with random workflows); print verdicts; fail on any violation (out/chaos/).
	$(BIN) chaos --scenario standard $(CHAOS_FLAGS) --out out/chaos

chaos-sabotage: ensure-db build-testbed ## Prove the checker can fail: sabotaged replicas must each produce a violation (out/chaos-sabotage/).
	$(TESTBED_BIN) chaos --scenario zombie-pause --sabotage fencing --expect-invalid --jobs 500 --duration 15s --out out/chaos-sabotage/fencing
	$(TESTBED_BIN) chaos --scenario kill-storm --sabotage rescuer --expect-invalid --jobs 500 --duration 15s --drain-timeout 10s --out out/chaos-sabotage/rescuer
	$(TESTBED_BIN) chaos --scenario lease-loss --sabotage lease-cancel --expect-invalid --jobs 500 --duration 15s --out out/chaos-sabotage/lease-cancel
	$(TESTBED_BIN) chaos --scenario cas-race --sabotage cas-guard --expect-invalid --jobs 500 --duration 15s --out out/chaos-sabotage/cas-guard
	$(TESTBED_BIN) chaos --scenario conn-reset --sabotage deadlock-retry --expect-invalid --jobs 500 --duration 15s --out out/chaos-sabotage/deadlock-retry
	$(TESTBED_BIN) chaos --scenario read-only --sabotage outcome-retry --expect-invalid --jobs 500 --duration 15s --out out/chaos-sabotage/outcome-retry
	$(TESTBED_BIN) chaos --scenario kill-storm --workflows --sabotage unblock-outside-tx --expect-invalid --jobs 1500 --duration 20s --out out/chaos-sabotage/unblock-outside-tx
	$(TESTBED_BIN) chaos --scenario keys-kill-storm --sabotage key-early-free --expect-invalid --jobs 1500 --duration 20s --out out/chaos-sabotage/key-early-free
	$(TESTBED_BIN) chaos --scenario worker-pause --sabotage remote-fencing --expect-invalid --jobs 250 --duration 25s --out out/chaos-sabotage/remote-fencing
	$(TESTBED_BIN) chaos --scenario policy-kill-storm --sabotage rate-window --expect-invalid --jobs 1500 --duration 20s --out out/chaos-sabotage/rate-window
	$(TESTBED_BIN) chaos --scenario policy-partition --sabotage rate-window --expect-invalid --jobs 1500 --duration 20s --out out/chaos-sabotage/rate-window-type

.PHONY: chaos-workflows
chaos-workflows: ensure-db build ## The workflow scenarios of make chaos alone (random DAGs through kill-storm, zombie-pause, partition, db-restart); fail on any violation (out/chaos-workflows/).
	for s in workflows-kill-storm workflows-zombie-pause workflows-partition workflows-db-restart; do \
		$(BIN) chaos --scenario $$s --jobs 1500 --duration 20s --out out/chaos-workflows || exit 1; \
	done

# chaos-remote: the remote set (docs/chaos.md "Remote workers"): worker
# processes of every library behind fault proxies.
CHAOS_REMOTE_FLAGS ?= --jobs 250 --duration 25s --drain-timeout 40s --seed 42

.PHONY: chaos-remote
chaos-remote: ensure-db build ## Run every remote chaos scenario (Go, jobq work, Python and Node workers; worker kill/pause/partition, ack loss, duplicate completions, replica kill); fail on any violation (out/chaos-remote/).
	$(BIN) chaos --scenario remote $(CHAOS_REMOTE_FLAGS) --out out/chaos-remote

# HA topologies (docs/chaos.md "Topologies"): a 3-node Galera cluster and a
# primary-replica failover, both started by the harness on loopback.
CHAOS_HA_FLAGS ?= --jobs 2000 --duration 30s --seed 42

.PHONY: ensure-galera chaos-galera chaos-failover
ensure-galera: ## Make sure galera-4 and rsync are there for --topology galera3 (installs them as root with apt-get if not).
	@scripts/ensure-galera.sh

chaos-galera: ensure-db ensure-galera build ## Run the ha-galera scenarios on a 3-node Galera cluster (node kill/restart/isolate, random workflows through a node kill); fail on any violation (out/chaos-galera/).
	$(BIN) chaos --scenario ha-galera $(CHAOS_HA_FLAGS) --out out/chaos-galera

chaos-failover: ensure-db build ## Primary-replica failover, async then semi-sync: async must show acknowledged jobs lost, semi-sync none (out/chaos-failover/).
	$(BIN) chaos --scenario ha-failover $(CHAOS_HA_FLAGS) --out out/chaos-failover

# Periodic schedules under faults (docs/chaos.md "Periodic schedules").
.PHONY: chaos-policy chaos-ledger
chaos-policy: ensure-db build ## Run the policy scenarios: a periodic schedule beside the workload through kills (and a failover, 10 minutes); the fire checks judge its ledger (out/chaos-policy/).
	$(BIN) chaos --scenario policy $(CHAOS_FLAGS) --jobs 3000 --out out/chaos-policy

chaos-ledger: ensure-db ## The 60-instant test (10 minutes): an @every 10s schedule through six replica kills and one failover shows exactly 60 ledger entries, each fired once or skipped with its reason (out/chaos-ledger/).
	JOBQ_CHAOS_LEDGER_OUT=$(CURDIR)/out/chaos-ledger go test -tags chaosledger ./testbed/chaos -run TestChaosFireLedgerSixtyInstants -count=1 -timeout 30m -v

.PHONY: dashboards-check metrics-test
dashboards-check: ## Check alert rules (with their unit tests) and scrape configs with promtool.
	cd dashboards/prometheus && promtool check rules alerts.yml && promtool test rules alerts_test.yml && \
	  promtool check config prometheus.yml && promtool check config prometheus-local.yml

metrics-test: test-deps ## Metrics, dashboards and compose tests against a real Prometheus (Debian's prometheus package).
	$(GO) test -race -count=1 ./metrics/ ./dashboards/

.PHONY: bench-ci bench-go

bench: ensure-db build ## Full bench (about 10 min): ceiling vs classic vs cas vs skiplocked, sweeps, 0/100k/1M rows, latency, idle, EXPLAIN (out/bench/).
	$(BIN) bench --out out/bench

bench-ci: ensure-db build ## <= 60 s bench subset; fails when its ratios regress beyond bench/baseline.json's tolerance (out/bench-ci/).
	$(BIN) bench --ci --out out/bench-ci

bench-go: ensure-db ## Go benchmarks of the claim and completion paths, 5 runs for benchstat (out/bench/gobench.txt).
	mkdir -p out/bench
	$(GO) test -run '^$$' -bench . -benchtime 100x -count 5 ./testbed/bench/ | tee out/bench/gobench.txt

FUZZTIME ?= 20s

fuzz: ensure-db ## Run each fuzz target for FUZZTIME (default 20s, 2 workers): submit decoder, HTTP submit handler on a real DB, SanitizeText.
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSubmit$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s -parallel 2 ./service/
	$(GO) test -run '^$$' -fuzz '^FuzzSubmitHandler$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s -parallel 2 ./httpapi/
	$(GO) test -run '^$$' -fuzz '^FuzzSanitizeText$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 3s -parallel 2 ./store/
