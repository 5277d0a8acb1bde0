# The two set-up commands: `make start` runs OptiML Studio on this machine (SQLite, no
# Redis needed), `make test` runs every test. Both make the virtual environment first.

VENV := .venv
PYTHON := $(VENV)/bin/python
# Touched after a successful install; reinstalls when pyproject.toml changes.
INSTALLED := $(VENV)/.installed

.PHONY: start test lint

$(PYTHON):
	python3 -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(PYTHON)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	touch $@

start: $(INSTALLED)
	$(PYTHON) manage.py migrate --noinput
	$(PYTHON) manage.py sync_tasks
	PYTHON=$(PYTHON) scripts/serve

test: $(INSTALLED)
	$(PYTHON) -m pytest tests

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
