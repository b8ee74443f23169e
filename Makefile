# The two commands: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test install lint format bench bench-loop stop status clean-var backup restore

$(STAMP): pyproject.toml clients/python/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet -e ./clients/python
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	bin/cairn-run

# Runs the whole suite against real services: the embedded PostgreSQL+pgvector
# and Valkey (started if needed, stopped afterwards if this started them), or
# DATABASE_URL / REDIS_URL when set. Browser tests need /usr/bin/chromium.
test: $(STAMP)
	@test -x /usr/bin/chromium || { echo "make test: browser tests need Debian's chromium (apt-get install chromium)"; exit 1; }
	$(PY) -m cairn.embedded run -- $(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) -m cairn.embedded run -- $(PY) bench/run_all.py $(BENCH_ARGS)

# The agent-loop benchmark (docs/benchmarks/agent-loop.md): four memory policies on
# the same seeds, against gunicorn on the bench database. LOOP_ARGS narrows it
# (e.g. LOOP_ARGS="--seeds 5"); then the f/w/g sweep (SWEEP_ARGS).
bench-loop: $(STAMP)
	$(PY) -m cairn.embedded run -- $(PY) bench/agent_loop/run.py --serve \
		--policies none,recency,self_report,cairn,cairn_lessons \
		--out bench/results/agent_loop $(LOOP_ARGS)
	$(PY) -m cairn.embedded run -- $(PY) bench/agent_loop/sweep.py $(SWEEP_ARGS)

# `make backup` writes backups/cairn-<stamp>.tar (database dump + secret key);
# `make restore FILE=backups/cairn-....tar` restores it over the configured database.
backup: $(STAMP)
	$(PY) -m cairn.backup backup $(FILE)

restore: $(STAMP)
	@test -n "$(FILE)" || { echo "usage: make restore FILE=backups/cairn-....tar"; exit 2; }
	$(PY) -m cairn.backup restore $(FILE)

status: $(STAMP)
	$(PY) -m cairn.embedded status

stop: $(STAMP)
	$(PY) -m cairn.embedded stop
