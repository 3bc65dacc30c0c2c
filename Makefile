# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: install test-deps demo test lint typecheck unit bench browser-deps clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

# The tests also run the Ray engine against the local one; the demo never needs Ray.
test-deps: $(TEST_STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[ray]'
	touch $(TEST_STAMP)

demo: install
	$(BIN)/sim2real demo

lint: install
	$(BIN)/ruff check src tests bench

typecheck: install
	$(BIN)/mypy

unit: test-deps
	$(BIN)/python -m pytest

test: browser-deps lint typecheck unit

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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
