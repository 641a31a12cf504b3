# The two commands of the README: `make demo` and `make test`; and `make check`,
# the development loop.  Each sets up
# .venv (the project and its dev tools) and a jj >= 0.30; `make test` also the
# real Claude Code CLI (for the end-to-end test, under .venv/claude-code),
# installing Debian's nodejs and npm first when they are missing, and
# PostgreSQL's server programs (Debian's postgresql) for the store tests, which
# start a throwaway server of their own (tests/pg.py) and stop it at the end.
# `DURABILITY_TEST_DATABASE=postgresql make test` runs the whole suite on it.
#
# The tests come in tiers (markers, pyproject.toml): `slow` (over ~5 s: the
# real Claude Code, big trees), `timing` (asserts against wall-clock budgets
# or racing timers) and `pg` (needs the PostgreSQL server).
#   make check   the development loop: in parallel (pytest-xdist, one worker
#                per core), SQLite only, neither slow nor timing.
#   make test    everything: ruff, mypy --strict, the suite but the timing
#                tier in parallel, then the timing tier alone, serially (a
#                budget test must not share the machine with its own suite).
# Extra pytest arguments: make check ARGS='tests/durability/store -x'.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST := PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest
ARGS ?=

.PHONY: setup demo check test lint bench clean

setup: $(VENV)/.installed $(BIN)/jj-ready

$(VENV)/.installed: pyproject.toml scripts/make-venv.sh
	sh scripts/make-venv.sh $(PY) $(VENV)
	# compat: a plain path entry instead of setuptools' import finder, which
	# costs ~10 ms at every interpreter start, i.e. on every hook call.
	$(BIN)/python -m pip install -q --disable-pip-version-check \
		--config-settings editable_mode=compat -e '.[dev]'
	touch $@

$(BIN)/jj-ready: scripts/install-jj.sh $(VENV)/.installed
	sh scripts/install-jj.sh $(VENV)
	touch $@

# The pinned Claude Code that tests/e2e drives (node >= 18 and npm; on Debian as
# root the script installs them).
$(VENV)/claude-ready: scripts/install-claude-code.sh $(VENV)/.installed
	sh scripts/install-claude-code.sh $(VENV)/claude-code
	touch $@

# The pinned Codex and Gemini CLIs that tests/e2e drives (node >= 20 and npm;
# Codex's native binary comes as an optional dependency, checked by running it).
$(VENV)/agent-clis-ready: scripts/install-agent-clis.sh $(VENV)/.installed
	sh scripts/install-agent-clis.sh $(VENV)/agent-clis
	touch $@

demo: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python demo/demo.py

# PostgreSQL's initdb and pg_ctl: found, else Debian's package (as root).
$(VENV)/postgres-ready: scripts/install-postgres.sh scripts/postgres-server.sh
	sh scripts/install-postgres.sh
	touch $@

check: setup
	DURABILITY_TEST_DATABASE=sqlite $(PYTEST) -n auto -m "not slow and not timing and not pg" $(ARGS)

test: setup $(VENV)/claude-ready $(VENV)/agent-clis-ready $(VENV)/postgres-ready lint
	$(PYTEST) -n auto -m "not timing" $(ARGS)
	$(PYTEST) -m timing $(ARGS)

lint: setup
	$(BIN)/ruff check durability tests bench demo
	$(BIN)/mypy

bench: setup $(VENV)/postgres-ready
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/bench_capture.py
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/bench_startup.py

clean:
	rm -rf $(VENV)
