# The two commands of the README: `make demo` and `make test`.  Each sets up
# .venv (the project and its dev tools) and a jj >= 0.30; `make test` also the
# real Claude Code CLI (for the end-to-end test, under .venv/claude-code),
# installing Debian's nodejs and npm first when they are missing, and
# PostgreSQL's server programs (Debian's postgresql) for the store tests, which
# start a throwaway server of their own (tests/pg.py) and stop it at the end.
# `DURABILITY_TEST_DATABASE=postgresql make test` runs the whole suite on it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench clean

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

demo: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python demo/demo.py

# PostgreSQL's initdb and pg_ctl: found, else Debian's package (as root).
$(VENV)/postgres-ready: scripts/install-postgres.sh scripts/postgres-server.sh
	sh scripts/install-postgres.sh
	touch $@

test: setup $(VENV)/claude-ready $(VENV)/postgres-ready
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check durability tests bench demo
	$(BIN)/mypy

bench: setup $(VENV)/postgres-ready
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/bench_capture.py
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/bench_startup.py

clean:
	rm -rf $(VENV)
