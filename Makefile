# OrbChat: `make run` serves it at http://127.0.0.1:8000, `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
CHROMIUM ?= /usr/bin/chromium

.PHONY: run test install install-dev browser lint lock clean

run: install
	$(BIN)/python -m orbchat.run

# Tests keep their data (test database, collected static files) apart from `make run`'s.
test: install-dev browser
	ORBCHAT_DATA_DIR=$(CURDIR)/var/test $(BIN)/python -m pytest $(PYTEST_ARGS)

# `make run` needs only the runtime; tests and lint add their tools.
install: $(STAMP)
install-dev: $(DEV_STAMP)

# Each reinstalls only when its lock file changes; otherwise a no-op.
$(STAMP): requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	@touch $(STAMP)

$(DEV_STAMP): $(STAMP) requirements-dev.lock
	$(BIN)/python -m pip install --quiet -r requirements-dev.lock
	@touch $(DEV_STAMP)

# Browser tests drive Debian's Chromium; install it when missing and we are allowed to.
browser:
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing Chromium for the browser tests (apt-get install chromium)…"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "Chromium is missing at $(CHROMIUM). Install it (sudo apt-get install chromium)" \
	         "or point CHROMIUM=/path/to/chromium at one, then run make test again." >&2; \
	    exit 1; \
	  fi; \
	fi

lint: install-dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports

# Re-resolve the direct dependencies and pin both trees again: the runtime's, then the tools'
# on top of it (requirements-dev.lock holds only what the tools add).
lock:
	rm -rf /tmp/orbchat-lock && $(PYTHON) -m venv /tmp/orbchat-lock
	/tmp/orbchat-lock/bin/pip install --quiet -r requirements.in
	/tmp/orbchat-lock/bin/pip freeze | sed 's/^torch==\(.*\)+cpu$$/torch==\1/' > requirements.lock
	/tmp/orbchat-lock/bin/pip install --quiet -r requirements-dev.in
	( echo "# The test, lint and browser tools' whole tree, on top of requirements.lock (make lock writes both)."; \
	  echo "-r requirements.lock"; \
	  /tmp/orbchat-lock/bin/pip freeze | sed 's/^torch==\(.*\)+cpu$$/torch==\1/' | grep -vxFf requirements.lock ) \
	  > requirements-dev.lock

clean:
	rm -rf $(VENV)
