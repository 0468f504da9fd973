# OrbChat: `make run` serves it at http://127.0.0.1:8000, `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

.PHONY: run test install browser lint lock clean

run: install
	$(BIN)/python -m orbchat.run

# Tests keep their data (test database, collected static files) apart from `make run`'s.
test: install browser
	ORBCHAT_DATA_DIR=$(CURDIR)/var/test $(BIN)/python -m pytest $(PYTEST_ARGS)

install: $(STAMP)

# Reinstalls only when the lock file changes; `make install` is otherwise a no-op.
$(STAMP): requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	@touch $(STAMP)

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

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# Re-resolve the direct dependencies and pin the whole tree again.
lock:
	rm -rf /tmp/orbchat-lock && $(PYTHON) -m venv /tmp/orbchat-lock
	/tmp/orbchat-lock/bin/pip install --quiet -r requirements.in
	/tmp/orbchat-lock/bin/pip freeze | sed 's/^torch==\(.*\)+cpu$$/torch==\1/' > requirements.lock

clean:
	rm -rf $(VENV)
