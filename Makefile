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
