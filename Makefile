# Set-up is one idempotent step shared by every target: system packages, .venv,
# vyre + worker host + bundled plugins installed editable.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.vyre-installed
# Every bundled backend but vyre-faults, the fault-injection kit: installed, it adds two
# backends that fail on request (the fault suite installs it into a temporary site).
PLUGINS := $(filter-out plugins/vyre-faults/,$(sort $(dir $(wildcard plugins/*/pyproject.toml))))

.PHONY: setup run test test-fast lint bench clean

setup: $(STAMP)

# setuptools tells every editable install of a mapped layout to "be careful with folders"
# named like the package, as a warning (information only: each of ours is that folder).
$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml) .ci/system-deps
	bash .ci/system-deps
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" \
	    $(BIN)/python -m pip install --quiet -e '.[test,ray]' $(addprefix -e ,$(PLUGINS))
	touch $@

run: setup
	$(BIN)/vyre demo

# Two test workers (CI has 2 cores); a module stays on one worker, so its fixtures and
# its pools are started once.
test: setup lint
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The inner loop: the pure tiers (supervision rules, IR, wire, routing, contract, codec,
# errors), no process started (tests/conftest.py refuses one): about a minute (48 s of
# CPU time on a 2-core machine; longer while other work shares the cores).
test-fast: setup
	$(BIN)/python -m pytest -q -m "fast and not processes"

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/vyre bench

clean:
	rm -rf $(VENV) build *.egg-info plugins/*/*.egg-info
