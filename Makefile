PYTHON ?= python3
VENV := .venv
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: setup test test-fast lint plan run run-extended

# One virtual environment at .venv from the pinned constraints: what running needs first, then the
# test, case-study and browser-test packages for `make test`.
$(RUN_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -c constraints.txt -e .
	touch $@

$(TEST_STAMP): $(RUN_STAMP)
	$(VENV)/bin/pip install --quiet -c constraints.txt -e ".[dev]"
	touch $@

setup: $(RUN_STAMP)

# ruff (lint and format) and `snakemake --lint`, then the whole suite (what CI runs).
lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/snakemake --lint

test: lint
	$(VENV)/bin/pytest

# The edit-test loop: everything but the end-to-end, Slurm, fault-injection and browser tests.
test-fast: $(TEST_STAMP)
	$(VENV)/bin/pytest -m "not e2e"

# The workflow on CONFIG, checked first (`safetyrepro check` prints the plan). Without CONFIG
# Snakemake runs config/config.yaml; with it, that file alone (README "Configuration"). `make plan`
# is the same with --dry-run. The console script must be on PATH for the rules. After a crash:
# `snakemake --unlock`, then `make run` again (finished cells are kept). Snakemake writes the HTML
# report once the run has finished (it holds the working-dir lock until then).
CONFIG ?=
REPORT ?= results/report.html
SNAKEMAKE := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/snakemake $(if $(CONFIG),--configfile $(CONFIG))

plan: $(RUN_STAMP)
	$(VENV)/bin/safetyrepro check --plan $(if $(CONFIG),--configfile $(CONFIG))
	$(SNAKEMAKE) --dry-run

run: $(RUN_STAMP)
	$(VENV)/bin/safetyrepro check $(if $(CONFIG),--configfile $(CONFIG))
	$(SNAKEMAKE) --cores all --resources gpu=1 --rerun-incomplete --report $(REPORT) --report-after-run

# The extended envelope (config/extended.yaml: option order, few-shot draw, answer formulation and
# batch size as axes), CPU-sized, its report beside its results.
run-extended:
	$(MAKE) run CONFIG=config/extended.yaml REPORT=results/extended/report.html
