PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: setup test run

# One virtual environment at .venv, installed from the pinned constraints.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(VENV)/bin/pytest

# The workflow on CONFIG (default config/config.yaml), checked first; the console script must be on PATH
# for the rules. After a crash: `snakemake --unlock`, then `make run` again (finished cells are kept).
# Snakemake writes the HTML report once the run has finished (it holds the working-dir lock until then).
CONFIG ?= config/config.yaml

run: $(STAMP)
	$(VENV)/bin/safetyrepro check --configfile $(CONFIG)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/snakemake --cores all --resources gpu=1 --rerun-incomplete \
		--configfile $(CONFIG) --report results/report.html --report-after-run
