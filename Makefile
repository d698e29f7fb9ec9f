# Ether: one command per job. `make help` lists them.
#
# Everything is installed into the repo with pinned versions (tools/versions.mk):
#   .venv/          Python tools and the editable ether-client, ether-host, ether-agent
#   .tools/bin/     Go tools (protoc-gen-go, protoc-gen-go-grpc, grpcurl)
#   node_modules/   buf and protoc-gen-es (root), plus each TypeScript package's own
# Stamp files make a second `make setup` a fast no-op; they depend on the pin files, so a bump
# reinstalls only what changed.

include tools/versions.mk

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
.SECONDEXPANSION:
.NOTPARALLEL:
MAKEFLAGS += --no-print-directory

VENV  := .venv
PY    := $(VENV)/bin/python
TOOLS := .tools
STAMP := $(TOOLS)/stamps

export PATH := $(CURDIR)/$(TOOLS)/bin:$(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$(PATH)
export GOTOOLCHAIN := local
export GOBIN := $(CURDIR)/$(TOOLS)/bin
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export npm_config_audit := false
export npm_config_fund := false
export npm_config_update_notifier := false

# Pieces that exist only once other parts of the repo land are picked up when present.
PY_LINT_PATHS := $(wildcard server adapters/python tests bench clients/examples/python) tools/protoc-gen-grpcio-python
TS_PACKAGES   := adapters/typescript examples/agents/report tests/conformance/agents/typescript clients/examples/typescript tests/agents/ts_prober \
                 tests/interop/mcp_servers_ts tests/interop/mcp_client_ts examples/agents/mcp_everything \
                 web tests/web
NPM_DIRS      := clients/typescript $(patsubst %/package.json,%,$(wildcard $(addsuffix /package.json,$(TS_PACKAGES))))
TS_DIRS       := $(patsubst %/tsconfig.json,%,$(wildcard clients/typescript/tsconfig.json $(addsuffix /tsconfig.json,$(TS_PACKAGES))))
GO_MODULES    := $(patsubst %/go.mod,%,$(wildcard clients/go/go.mod clients/examples/go/go.mod adapters/go/go.mod examples/agents/*/go.mod tests/conformance/agents/go/go.mod tests/agents/go_prober/go.mod))
TEST_TIMEOUT  ?= 120
TS_TOUR       := clients/examples/typescript/dist/tour.js
CONSOLE       := web/dist/main.js

GO_TOOL_STAMPS := \
	$(STAMP)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) \
	$(STAMP)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) \
	$(STAMP)/grpcurl-$(GRPCURL_VERSION)
GEN_TOOLS := $(VENV)/.stamp node_modules/.stamp $(GO_TOOL_STAMPS)

.PHONY: help setup generate check test test-under-load run chaos bench clean lock terminal-tools \
	check-python check-proto check-breaking check-go check-ts check-generated

help: ## Show this help
	@echo "Usage: make <target>"
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

setup: $(GEN_TOOLS) $(foreach d,$(NPM_DIRS),$(d)/node_modules/.stamp) $(TS_TOUR) $(CONSOLE) terminal-tools ## Install every pinned tool and dependency into the repo (idempotent)
	@echo "setup: done"

# --- Programs for the terminal fidelity tests (tests/terminals/test_fidelity.py) ----------------
# tmux renders the reference screens; less, vim, top (procps), htop, dialog and tig are the programs
# compared (dialog and tig draw boxes and lines with the DEC special graphics character set);
# terminals start programs through util-linux `setsid --ctty`, and their I/O pumps under
# `setpriv --pdeathsig` (a test limits the host's descriptors with `prlimit`); bubblewrap (`bwrap`)
# gives every agent and terminal a PID namespace of its own (docs/agents.md). As root with apt-get
# (CI on a fresh Debian machine) whatever is missing is installed; elsewhere this only says what is
# missing (the fidelity tests skip without tmux or htop). `redis-server` (Debian's redis-server)
# is what the cluster tests start on a free port of their own (tests/support/redis.py). Debian's
# `chromium` is the browser the web console's tests drive (tests/web, through playwright-core:
# no browser download).
TERMINAL_TOOLS := tmux less vim top htop dialog tig setsid setpriv prlimit bwrap redis-server chromium
terminal-tools:
	@missing=""; for tool in $(TERMINAL_TOOLS); do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "setup: apt-get install tmux less vim procps htop dialog tig util-linux bubblewrap redis-server chromium (missing:$$missing)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux less vim procps htop dialog tig util-linux bubblewrap redis-server chromium >/dev/null; \
	else \
		echo "setup: missing$$missing -- install them for the terminal fidelity tests"; \
	fi

# --- Python -----------------------------------------------------------------------------------
# Editable installs in compat mode: a plain path in a .pth, so packages that appear after the
# install (generated code, new modules) import too. --no-deps: every dependency is in the lock.
# The host's one C extension (server/setup.py: the Struct converter) needs a C compiler: as root
# with apt-get, Debian's gcc is installed when there is none; elsewhere the install goes on and
# the host runs its Python converter (tests/host/test_struct_wire.py then says it was not built).
$(VENV)/.stamp: Makefile requirements-dev.txt tools/versions.mk clients/python/pyproject.toml server/pyproject.toml adapters/python/pyproject.toml server/setup.py server/ether_host/transport/_struct_wire.c
	@echo "setup: Python venv ($(VENV))"
	@if ! command -v cc >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "setup: apt-get install gcc (no C compiler)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null; \
	fi
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q pip==$(PIP_VERSION)
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation --config-settings editable_mode=compat \
		-e clients/python -e server -e adapters/python
	$(PY) -m pip check
	touch $@

# --- npm: root dev tools (buf, protoc-gen-es) and each TypeScript package -------------------------
# `npm install` rather than `npm ci`: the registry we reach carries only the Linux builds of
# platform packages (buf, esbuild, ...), so lockfiles written here list no others and `npm ci`
# rejects them as out of sync. With a lockfile in sync, `npm install` installs exactly its versions.
NPM_INSTALL := npm install --loglevel=error --no-save
node_modules/.stamp: package.json package-lock.json tools/versions.mk
	@echo "setup: npm install (buf, protoc-gen-es)"
	$(NPM_INSTALL)
	test "$$(node_modules/.bin/buf --version)" = "$(BUF_VERSION)" \
		|| { echo "package.json pins a buf other than BUF_VERSION=$(BUF_VERSION) (tools/versions.mk)" >&2; exit 1; }
	test "$$(node_modules/.bin/protoc-gen-es --version)" = "protoc-gen-es v$(PROTOC_GEN_ES_VERSION)" \
		|| { echo "package.json pins a protoc-gen-es other than PROTOC_GEN_ES_VERSION=$(PROTOC_GEN_ES_VERSION) (tools/versions.mk)" >&2; exit 1; }
	touch $@

# The TypeScript client tour (clients/examples/typescript) runs as plain JavaScript: its build
# compiles clients/typescript (the @etherhost/client package it imports) and then itself.
$(TS_TOUR): clients/examples/typescript/node_modules/.stamp clients/typescript/node_modules/.stamp \
		clients/examples/typescript/src/tour.ts $(wildcard clients/typescript/src/gen/ether/*/*.ts)
	@echo "setup: build the TypeScript client tour"
	cd clients/examples/typescript && npm run --silent build

# The web console (web/): esbuild bundles it into web/dist, which the host serves at / on its
# HTTP listener (docs/console.md). It imports the generated stubs of clients/typescript.
$(CONSOLE): web/node_modules/.stamp web/build.mjs $(wildcard web/src/*.ts web/src/pages/*.ts web/src/*.css web/src/*.html) \
		$(wildcard clients/typescript/src/gen/ether/*/*.ts)
	@echo "setup: build the web console (web/dist)"
	cd web && node build.mjs

%/node_modules/.stamp: $$(wildcard $$*/package.json $$*/package-lock.json)
	@echo "setup: npm install ($*)"
	cd $* && $(NPM_INSTALL)
	touch $@

# --- Go tools --------------------------------------------------------------------------------------
$(STAMP)/protoc-gen-go-%:
	go install google.golang.org/protobuf/cmd/protoc-gen-go@$*
	mkdir -p $(@D) && touch $@

$(STAMP)/protoc-gen-go-grpc-%:
	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$*
	mkdir -p $(@D) && touch $@

$(STAMP)/grpcurl-%:
	go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$*
	mkdir -p $(@D) && touch $@

# --- Code generation -------------------------------------------------------------------------------
generate: $(GEN_TOOLS) ## Regenerate the Python, Go and TypeScript stubs from proto/ (buf.gen.yaml)
	tools/clean-generated
	buf generate
	cd clients/go && go mod tidy

lock: ## Re-resolve tools/requirements-dev.in into requirements-dev.txt
	PYTHON=$(PYTHON) PIP_VERSION=$(PIP_VERSION) tools/lock-python

# --- Checks ----------------------------------------------------------------------------------------
check: setup check-python check-proto check-breaking check-go check-ts check-generated ## Lint, format, type-check and drift-check everything
	@echo "check: all passed"

check-python: setup
	ruff check $(PY_LINT_PATHS)
	ruff format --check $(PY_LINT_PATHS)
	@if [ -d server/ether_host ]; then mypy; else echo "mypy: skipped (no server/ether_host yet)"; fi

check-proto: setup
	buf lint
	buf format -d --exit-code

check-breaking: setup
	@if git rev-parse -q --verify refs/heads/main >/dev/null \
		&& git ls-tree -r --name-only main -- proto | grep '\.proto$$' >/dev/null; then \
		echo "buf breaking --against '.git#branch=main'"; \
		buf breaking --against '.git#branch=main'; \
	else \
		echo "buf breaking: skipped (branch main has no proto files yet)"; \
	fi

check-go: setup
	@for m in $(GO_MODULES); do \
		unformatted=$$(cd $$m && find . -name '*.go' -not -name '*.pb.go' -print0 | xargs -0 -r gofmt -l); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed in $$m:"; echo "$$unformatted"; exit 1; fi; \
		echo "go vet ($$m)"; (cd $$m && go vet ./...); \
	done

check-ts: setup
	@for d in $(TS_DIRS); do echo "tsc --noEmit ($$d)"; (cd $$d && node_modules/.bin/tsc -p tsconfig.json --noEmit); done

check-generated: setup
	tools/check-generated $(MAKE) generate

# --- Run -------------------------------------------------------------------------------------------
test: setup ## Run the test suite (the Go and TypeScript adapters' unit tests, then pytest over tests/; TEST_TIMEOUT=seconds per test, PYTEST_ARGS=...)
	cd adapters/go && go test ./...
	cd adapters/typescript && npm test --silent
	@# No `find | grep -q` here: under pipefail, find killed by SIGPIPE when grep -q exits
	@# before find has written all of its list fails the pipeline, and no test would run.
	@if [ -z "$$(find tests -name 'test_*.py' -print -quit 2>/dev/null)" ]; then \
		echo "test: no test files under tests/ yet (nothing run)"; \
	else \
		$(PY) -m pytest -p no:cacheprovider --timeout=$(TEST_TIMEOUT) tests adapters/python/tests $(PYTEST_ARGS); \
	fi

test-under-load: setup ## Run `make test` with one core kept busy by a spinning process (what a loaded CI machine does to the tests' budgets)
	@spin() { while :; do :; done; }; spin & spinner=$$!; \
	trap 'kill $$spinner 2>/dev/null || true' EXIT; \
	echo "test-under-load: pid $$spinner spins on one core"; \
	$(MAKE) test

run: setup ## Start the host with the example agents (ARGS=... are passed to `ether serve`)
	$(VENV)/bin/ether serve --config examples/ether.toml $(ARGS)

chaos: setup ## Traffic to echo agents in three languages while agents and the host are killed; prints lost/duplicated/late/orphaned (ARGS=--seed N --record ...; at most ~10 minutes; not part of make test)
	$(PY) -m bench.chaos $(ARGS)

bench: setup ## Run the benchmarks under bench/
	@if [ -f bench/__main__.py ]; then $(PY) -m bench $(ARGS); \
	elif [ -f bench/run.py ]; then $(PY) bench/run.py $(ARGS); \
	else echo "bench: nothing to run yet (add bench/__main__.py or bench/run.py)"; fi

clean: ## Remove installed tools, dependencies and caches (generated code is kept: it is committed)
	rm -rf $(VENV) $(TOOLS) node_modules $(foreach d,clients/typescript clients/examples/typescript adapters/typescript,$(d)/node_modules $(d)/dist)
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
	rm -rf .mypy_cache .ruff_cache .pytest_cache
	rm -f server/ether_host/transport/_struct_wire.*.so
