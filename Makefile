# convexsim: two commands on a fresh machine.
#   make demo   create .venv (if needed), install, compile the kernels, run the main job on a shipped scene
#   make test   the same environment plus test tools (and Chromium for viewer tests), then the whole
#               suite, slow tests included (CI runs this); make test-fast skips the tests marked slow
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
OUT    ?= out

.PHONY: demo test test-fast venv install install-test browser bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.core-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml $(VENV)/.core-installed
	$(PIP) install --quiet -e '.[test]'
	touch $@

venv install: $(VENV)/.core-installed
install-test: $(VENV)/.test-installed

# Chromium (Debian package) for the viewer's browser tests; installed only when missing and root.
browser:
	@if command -v chromium >/dev/null 2>&1; then echo "chromium: $$(command -v chromium)"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian chromium for the viewer tests..."; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-liberation >/dev/null) \
	  || echo "WARNING: could not install chromium; browser tests will be skipped"; \
	else echo "WARNING: chromium missing and not root; browser tests will be skipped"; fi

# `convexsim warmup` compiles the numba kernels once (about 2 min the first time, a few seconds when
# they are cached), so the run below and the README's first `convexsim run` start at full speed.
demo: $(VENV)/.core-installed
	@mkdir -p $(OUT)
	$(VENV)/bin/convexsim warmup
	$(VENV)/bin/convexsim run box_stack --out $(OUT)/box_stack.npz --html $(OUT)/box_stack.html
	@echo
	@echo "Trajectory: $(OUT)/box_stack.npz   (inspect: $(VENV)/bin/convexsim info $(OUT)/box_stack.npz)"
	@echo "Animation:  $(OUT)/box_stack.html  (open in any browser)"

# The suite runs on 2 pytest-xdist workers (CI has 2 cores), one test file per worker at a time
# (--dist loadfile: a module's fixtures, e.g. the learn tests' fitted models, are built once).
# `convexsim warmup` first compiles the numba kernels into NUMBA_CACHE_DIR once, so that the workers load
# them instead of both compiling them (numba's cache writes are atomic renames, safe across processes).
# The Lemke tests on real contact data (marker roundoff: the captured contact LCPs, the perturbation
# tests, LCP runs of the shipped scenes, the warm start along them) run again under other BLAS settings:
# Lemke's answers must not depend on the kernel (OPENBLAS_CORETYPE) or thread count, i.e. on the last bits
# of the contact LCP. The other tests/lcp tests (textbook and random LCPs, the worked examples, trajectory
# comparison) see no BLAS-dependent data, so rerunning them would check nothing new.
# --no-loadscope-reorder: files are handed out in collection order (conftest.py collects the two 1–3 minute
# mixed_clutter LCP runs first), not by test count, which sent those one-test files last and left one worker
# running them alone for minutes.
# --durations: the slowest tests in CI's log (the whole run should stay well under 10 minutes).
BLAS_RERUN := $(PY) -m pytest -q -p no:cacheprovider -m "roundoff and not slow" tests/lcp
test: $(VENV)/.test-installed browser
	$(VENV)/bin/convexsim warmup
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25
	OPENBLAS_NUM_THREADS=1 $(BLAS_RERUN)
	OPENBLAS_CORETYPE=Prescott $(BLAS_RERUN)

test-fast: $(VENV)/.test-installed
	$(PY) -m pytest -q -m "not slow"

bench: $(VENV)/.core-installed
	$(VENV)/bin/convexsim bench

clean:
	rm -rf $(OUT) .pytest_cache
