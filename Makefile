# tabd: `make demo` and `make test` each work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.tabd-installed

.PHONY: demo test test-fast test-deps venv clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	# torch first, pinned: the CPU build on this machine's disk; a looser spec pulls a CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tabd demo

# The test command named in the README; .ci/run calls it.
test: $(STAMP) test-deps
	$(PY) -m pytest -q

# Things the end-to-end tests need beyond Python packages (chromium, neovim, node packages...).
test-deps: $(STAMP)
	@for f in .ci/setup.d/*.sh; do [ -e "$$f" ] || continue; echo "setup: $$f"; bash "$$f" || exit 1; done

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not editors and not browser and not llamacpp"

clean:
	rm -rf $(VENV) build *.egg-info
