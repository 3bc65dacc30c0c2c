# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The demo's output: inside build/, which git ignores and `make clean` removes.
DEMO_OUT ?= build/demo
# Three layers, each installed once: the core (all the demo needs), then the extras and
# developer tools, then Ray for the engine tests. The core is installed with --no-compile:
# Python then compiles only the modules a run imports, not every file of every dependency.
CORE_STAMP := $(VENV)/.installed-core
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: install demo-deps test-deps demo test lint typecheck unit bench browser-deps docs clean

demo-deps: $(CORE_STAMP)

$(CORE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e .
	touch $@

install: $(STAMP)

$(STAMP): $(CORE_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $@

# The tests also run the Ray engine against the local one; the demo never needs Ray.
test-deps: $(TEST_STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[ray]'
	touch $@

demo: demo-deps
	$(BIN)/sim2real demo -o $(DEMO_OUT)

lint: install
	$(BIN)/ruff check src tests bench tools

typecheck: install
	$(BIN)/mypy

# Two workers, one test file each at a time: files share their session fixtures (the MuJoCo
# demo is generated under a file lock, once for both).
unit: test-deps
	$(BIN)/python -m pytest -n 2 --dist loadfile

test: browser-deps lint typecheck unit

# docs/cli.md is generated from the commands' --help; a test fails when it is stale.
docs: demo-deps
	$(BIN)/python tools/cli_reference.py

# Debian's chromium for the browser tests (never a downloaded browser); where it cannot be
# installed (not root, no network) those tests skip and everything else still runs.
browser-deps:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && apt-get install -y -qq chromium) \
	    || echo "browser-deps: apt-get could not install chromium; browser tests will skip"; \
	else echo "browser-deps: /usr/bin/chromium is missing and we are not root; browser tests will skip"; fi

bench: install
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
