# The README's two commands. `make demo`: set up .venv and run the main job;
# `make test`: set up .venv and run the test suite (all of it: CI runs this).
# And the fast lane a maintainer runs on every change, `make check`: the linter, then the
# tests but the slow and the browser ones; it prints how long it took.

PYTHON := $(shell command -v python3.11 || command -v python3)
# When make started (seconds since the epoch): the demo prints the time since, install included.
STARTED := $(shell date +%s)
VENV := .venv
BIN := $(VENV)/bin
# Written once the kit is installed in .venv (and, for the tests, its optional
# dependencies too); older than pyproject.toml means install again.
STAMP := $(VENV)/installed.stamp
TEST_STAMP := $(VENV)/installed-test.stamp

.PHONY: demo test check

demo: $(STAMP)
	@bash tools/install_jail.sh
	$(BIN)/python -m tools.demo --started $(STARTED)

test: $(TEST_STAMP)
	@bash tools/install_jail.sh
	$(BIN)/python -m pytest -n 2 --dist loadgroup

check: $(TEST_STAMP)
	@bash tools/install_jail.sh
	@start=$$(date +%s); \
	$(BIN)/ruff check . && \
	$(BIN)/python -m pytest -n 2 --dist loadgroup -m "not slow and not browser"; \
	status=$$?; \
	echo "make check: $$(( $$(date +%s) - start )) s (wall)"; \
	exit $$status

$(STAMP): pyproject.toml
	@start=$$(date +%s); \
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); \
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e . && \
	touch $@ && \
	echo "install: $$(( $$(date +%s) - start )) s"

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[cluster,browser,lint]'
	touch $@
