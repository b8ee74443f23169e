# The two commands: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test install lint format bench bench-loop docs e2e stop status clean-var backup restore

$(STAMP): pyproject.toml clients/python/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet -e ./clients/python
	@# The bench extra (AgentDojo's attack templates, read as files) without the model SDKs it pulls.
	$(PY) -m pip install --quiet --no-deps "$$($(PY) -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["bench"][0])')"
	@touch $(STAMP)

install: $(STAMP)

# The docs site is built first: the review UI links its help pages under /docs/.
run: $(STAMP) docs
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

# The real agent binaries end to end (tests/e2e/): the pinned Claude Code and Codex
# from npm, installed into var/e2e/ (never globally), against a scripted local model
# server and the embedded services. Claude Code's Bash sandbox needs bubblewrap and
# socat (Debian: apt-get install bubblewrap socat). To move to newer binaries, change
# the pins here, run `CAIRN_E2E_RECORD=1 make e2e` once to re-record the hook payloads
# (tests/e2e/fixtures/), and read the diff.
CLAUDE_CODE_VERSION := 2.1.328
CODEX_VERSION := 0.171.0
E2E := var/e2e
E2E_STAMP := $(E2E)/.installed-$(CLAUDE_CODE_VERSION)-$(CODEX_VERSION)

$(E2E_STAMP):
	@command -v bwrap >/dev/null && command -v socat >/dev/null || { echo "make e2e: Claude Code's sandbox needs bubblewrap and socat (apt-get install bubblewrap socat)"; exit 1; }
	mkdir -p $(E2E)
	npm install --prefix $(E2E) --no-audit --no-fund --no-save \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION)
	$(E2E)/node_modules/.bin/claude --version | grep -q '^$(CLAUDE_CODE_VERSION) '
	$(E2E)/node_modules/.bin/codex --version | grep -q ' $(CODEX_VERSION)$$'
	@touch $(E2E_STAMP)

e2e: $(STAMP) $(E2E_STAMP)
	CAIRN_E2E=1 $(PY) -m cairn.embedded run -- $(PY) -m pytest tests/e2e --durations=0 $(PYTEST_ARGS)

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
# the same seeds, plus cairn and self_report on the held-out attack set, against
# gunicorn on the bench database (the full run: 20 seeds x all 32 families).
# LOOP_ARGS narrows it (e.g. LOOP_ARGS="--seeds 5"); then the dev vs held-out attack
# table, then the f/w/g sweep (SWEEP_ARGS).
bench-loop: $(STAMP)
	$(PY) -m cairn.embedded run -- $(PY) bench/agent_loop/run.py --serve \
		--policies none,recency,self_report,cairn,cairn@heldout,self_report@heldout \
		--seeds 20 --families 32 --out bench/results/agent_loop $(LOOP_ARGS)
	$(PY) bench/agent_loop/compare.py bench/results/agent_loop.json
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
