# The two commands: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test install lint format bench docs stop status clean-var backup restore

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

# The docs site from docs/ into var/site/. Strict: a broken link, anchor or nav entry
# fails it. The API, configuration and command references are generated (docsgen/);
# no service needs to run.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) -m cairn.embedded run -- $(PY) bench/run_all.py $(BENCH_ARGS)

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
