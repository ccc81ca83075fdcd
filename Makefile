# The two set-up commands of the README, and their parts. Everything is installed here, into
# git-ignored folders of the clone: .venv (kbgen) and, later, .vllm (a real vLLM and its models).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)

.PHONY: demo test lint

## make demo: the main job — validate and list the knowledge base
demo: $(STAMP)
	$(BIN)/kbgen validate records/
	$(BIN)/kbgen list records/

## make test: lint, type-check and the whole test suite
test: $(STAMP) lint
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench/perf
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@
