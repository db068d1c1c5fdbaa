# convexsim: two commands on a fresh machine.
#   make demo   create .venv (if needed), install, run the main job on a shipped scene (compiling its kernels first)
#   make test   the same environment plus test tools (and Chromium for viewer tests), then the whole
#               suite, slow tests included (CI runs this, then make test-long: the runs of minutes, the
#               Drake comparisons and the round-off reruns); make test-fast skips the tests marked slow
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
OUT    ?= out

.PHONY: demo test test-fast test-latest test-long test-roundoff venv install install-test constraints browser bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# The installs use the versions the suite was last verified with: constraints/py3.X.txt, the `pip freeze` of
# the test environment on that Python (make constraints writes it). A Python without a file installs the
# newest releases (and says so); `make test-latest` runs the fast tier against the newest releases on purpose.
PYVER       := $(shell $(PYTHON) -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null)
CONSTRAINTS := constraints/py$(PYVER).txt
PIN         := $(if $(wildcard $(CONSTRAINTS)),-c $(CONSTRAINTS),)

$(VENV)/.core-installed: pyproject.toml $(wildcard $(CONSTRAINTS)) | $(VENV)/bin/python
	@[ -n "$(PIN)" ] || echo "note: no $(CONSTRAINTS): installing the newest releases (not the verified versions)"
	$(PIP) install --quiet $(PIN) -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml $(wildcard $(CONSTRAINTS)) $(VENV)/.core-installed
	$(PIP) install --quiet $(PIN) -e '.[test]'
	touch $@

# Record the test environment's versions as this Python's verified set (after a green `make test`).
constraints: $(VENV)/.test-installed
	@mkdir -p constraints
	@{ echo "# Versions \`make test\` was verified with on Python $(PYVER) (\`make constraints\`: pip freeze of .venv)."; \
	   $(PIP) freeze --exclude-editable --all | grep -v -E '^(pip|setuptools|wheel)=='; } > $(CONSTRAINTS).tmp
	@mv $(CONSTRAINTS).tmp $(CONSTRAINTS) && echo "wrote $(CONSTRAINTS)"

venv install: $(VENV)/.core-installed
install-test: $(VENV)/.test-installed

# Chromium (Debian package) for the viewer's browser tests; installed only when missing and root. Without it
# the browser tests skip; in CI (CI=true) a missing Chromium is an error, here and in the suite (conftest.py
# turns a skipped browser or Drake test into a failure under CI=true).
browser:
	@if command -v chromium >/dev/null 2>&1; then echo "chromium: $$(command -v chromium)"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian chromium for the viewer tests..."; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-liberation >/dev/null) \
	  || { if [ "$$CI" = "true" ]; then echo "ERROR: could not install chromium (CI=true: the browser tests must run)"; exit 1; fi; \
	       echo "WARNING: could not install chromium; browser tests will be skipped"; }; \
	elif [ "$$CI" = "true" ]; then echo "ERROR: chromium missing and not root (CI=true: the browser tests must run)"; exit 1; \
	else echo "WARNING: chromium missing and not root; browser tests will be skipped"; fi

# The run compiles the kernels of its own step first (the first time only: it says so and how long it took;
# the shared kernels and the step compile in parallel processes, one per core), then runs at full speed.
# Then the other solver paths (kinematic trees, the LCP stepper) compile in the background: a detached process
# at the lowest CPU priority (python -m convexsim.tools.background_warmup, its output in $(OUT)/warmup.log), so
# that the next runs (a robot scene, --solver both) find their kernels compiled; a run that needs one it has not
# finished yet waits for it rather than compiling beside it. When every path is already cached it only checks.
demo: $(VENV)/.core-installed
	@mkdir -p $(OUT)
	$(VENV)/bin/convexsim run box_stack --out $(OUT)/box_stack.npz --html $(OUT)/box_stack.html
	@echo
	@echo "Trajectory: $(OUT)/box_stack.npz   (inspect: $(VENV)/bin/convexsim info $(OUT)/box_stack.npz)"
	@echo "Animation:  $(OUT)/box_stack.html  (open in any browser)"
	@$$(command -v setsid) nohup nice -n 19 $(PY) -m convexsim.tools.background_warmup $(OUT)/warmup.log > $(OUT)/warmup.log 2>&1 < /dev/null &
	@echo "Compiling the other solver paths (robots, the LCP stepper) in the background at low priority,"
	@echo "a minute or two on 2 cores: $(OUT)/warmup.log. Runs started meanwhile wait for the kernels they need."
	@echo "Next: $(VENV)/bin/convexsim run iiwa_push --html $(OUT)/iiwa.html, or"
	@echo "      $(VENV)/bin/convexsim run sphere_drop --solver both --html $(OUT)/drop.html"

# Tests: README "Testing" (the tiers, the reruns and why, where the time goes).
# The suite runs on 2 pytest-xdist workers (CI has 2 cores), one test file per worker at a time
# (--dist loadfile: a module's fixtures, e.g. the learn tests' fitted models, are built once).
# `convexsim warmup` first compiles the numba kernels into NUMBA_CACHE_DIR once, so that the workers load
# them instead of both compiling them (numba's cache writes are atomic renames, safe across processes).
# `--check` then runs every shipped scene a few steps with SAP and LCP in a fresh process and fails if any
# compiled a kernel: the warm-up must cover every shipped scene (a user never compiles mid-run; ≈ 6 s).
# --no-loadscope-reorder: files are handed out in collection order (conftest.py collects the two 1–3 minute
# mixed_clutter LCP runs first), not by test count, which sent those one-test files last and left one worker
# running them alone for minutes.
# --durations: the slowest tests in CI's log (the whole of `make test` should stay under 10 minutes).
#
# Round-off reruns (test-roundoff, run by test-long, so by CI on every landing): the tests marked `roundoff` (their outcome hinges on the last bits of the
# arithmetic: Lemke on real contact data, paths, pivots, rungs, trajectories compared exactly between two code
# paths) run again under the BLAS kernels of other processors: Haswell (the AVX2 kernel of AMD and older
# Intel machines; here also one BLAS thread) and Prescott (SSE3). The main run uses this machine's own kernel
# (SkylakeX on AVX-512). Then the ones marked `numba_target` too (a numba kernel decides the branch; the Lemke
# kernels, ≈ 1 min of CPU to compile) run with numba generating code for a generic x86-64 CPU, in a cache of
# their own (compiled again there). The slow ones are not rerun. Costs: README "Testing".
PYTEST        := $(PY) -m pytest -q
PARALLEL      := -n 2 --dist loadfile --no-loadscope-reorder
ROUNDOFF      := $(PYTEST) $(PARALLEL) -p no:cacheprovider -m "roundoff and not slow"
GENERIC_CACHE := $(CURDIR)/.numba_cache_generic

test: $(VENV)/.test-installed browser
	$(VENV)/bin/convexsim warmup --check
	$(PYTEST) $(PARALLEL) -m "not long and not drake" --durations=25

# The long tier: runs of minutes (the cold full-duration mixed_clutter LCP run, ≈ 4 min) and the comparisons
# with Drake (the `compare` extra, installed here: the Drake translation behind `bench --vs drake`). CI runs it
# after `make test` (.ci/run), so that `make test` itself stays within 10 minutes on a fresh 2-core clone; the
# round-off reruns (test-roundoff, below) run here too, so every CI landing still runs them.
test-long: $(VENV)/.compare-installed
	$(VENV)/bin/convexsim warmup
	$(PYTEST) -p no:cacheprovider -m "long or drake" --durations=10
	@$(MAKE) --no-print-directory test-roundoff

$(VENV)/.compare-installed: pyproject.toml $(VENV)/.test-installed
	$(PIP) install --quiet $(PIN) -e '.[test,compare]'
	touch $@

test-roundoff: $(VENV)/.test-installed
	OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 $(ROUNDOFF)
	OPENBLAS_CORETYPE=Prescott $(ROUNDOFF)
	NUMBA_CPU_NAME=generic NUMBA_CACHE_DIR=$(GENERIC_CACHE) \
	  $(PYTEST) $(PARALLEL) -p no:cacheprovider -m "roundoff and numba_target and not slow"

# The developer's tier: no slow test, on 2 workers (kernels compiled once by the warm-up, a few seconds when
# cached).
test-fast: $(VENV)/.test-installed
	$(VENV)/bin/convexsim warmup
	$(PYTEST) $(PARALLEL) -m "not slow and not long"

# The fast tier against the newest releases of every dependency (no constraints), in a venv of its own
# (.venv-latest) and a numba cache of its own (numba rewrites a cache index made by another numba version):
# an early warning that a new numpy/scipy/numba/Clarabel breaks something. The figures: README "Testing".
LATEST := .venv-latest
test-latest:
	@[ -x $(LATEST)/bin/python ] || $(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[test]'
	@$(LATEST)/bin/python -c 'import sys, numpy, scipy, numba, clarabel; print("Python", sys.version.split()[0], \
	  "numpy", numpy.__version__, "scipy", scipy.__version__, "numba", numba.__version__, "clarabel", clarabel.__version__)'
	NUMBA_CACHE_DIR=$(CURDIR)/.numba_cache_latest $(LATEST)/bin/convexsim warmup
	NUMBA_CACHE_DIR=$(CURDIR)/.numba_cache_latest $(LATEST)/bin/python -m pytest -q $(PARALLEL) -p no:cacheprovider \
	  -m "not slow and not long"

bench: $(VENV)/.core-installed
	$(VENV)/bin/convexsim bench

clean:
	rm -rf $(OUT) .pytest_cache $(GENERIC_CACHE) .numba_cache_latest
