# Set-up and checks for a fresh machine. `make test` is the README's test command (CI calls it).
PYTHON ?= python3
PYTEST_ARGS ?=

.PHONY: install install-dev services browser compiler lint test demo bench results

install:
	$(PYTHON) -m pip install -e .

install-dev:
	$(PYTHON) -m pip install -e '.[dev]'

# PostgreSQL and Redis for the lab-path tests (started if they are down).
services:
	bash scripts/ensure_services.sh

# Debian's Chromium for the Playwright browser tests.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium)

# A C++ compiler for the compiled CPU scan kernel (models_store/fast_scan_cpu.py): Debian's g++.
compiler:
	@command -v g++ >/dev/null 2>&1 || command -v c++ >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq g++)

# ruff's lint rules and its formatter (pyproject.toml [tool.ruff]), declared = imported
# dependencies (deptry), and the type checker over the packages, checks/ and benchmarks/
# (pyproject.toml [tool.mypy]).
lint: install-dev
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m deptry .
	$(PYTHON) -m mypy

test: install-dev services browser compiler
	$(PYTHON) -m pytest $(PYTEST_ARGS)

# The first study (75 s budgets: docs/RESULTS.md).
STUDY_BUNDLE ?= examples/paper.layerscope.zip
# The study made again with step budgets (docs/RESULTS-paper-steps.md).
STEPS_BUNDLE ?= examples/paper-steps.layerscope.zip

# Both studies (each imported once) beside the quick suite run live.
demo: install
	layerscope demo --bundle $(STEPS_BUNDLE) --bundle $(STUDY_BUNDLE)

# docs/RESULTS.md (+ docs/figures/*.png) from the study's bundle, claim by claim; docs/RESULTS-paper-steps.md
# (+ docs/figures/paper-steps/) from the paper-steps bundle.
results:
	$(PYTHON) -m pip install -e '.[report]'
	layerscope report $(STUDY_BUNDLE) -o docs/RESULTS.md
	layerscope report $(STEPS_BUNDLE) -o docs/RESULTS-paper-steps.md --figures-dir docs/figures/paper-steps
