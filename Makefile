# Two commands for a new user: `make demo` and `make test`. Both create .venv if missing and install
# torch pinned first (a CPU wheel here; an unpinned torch would pull a multi-GB CUDA build). PYTHONWARNINGS hides
# setuptools' notice that an editable install maps folders through a meta path finder (informational only).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast setup bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install -q -e ".[runtimes,fit,search,test]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m annette_torch.cli.demo

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/estimator_speed.py

clean:
	rm -rf $(VENV) build dist *.egg-info out
