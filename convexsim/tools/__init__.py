"""convexsim.tools: the tools around the simulator, each run by a CLI command; no module of the step path
imports them (``simulate`` takes only ``kernels.KernelClock``, the compile-time clock of a run).

* ``bench``: SAP benchmarks (random problems by size, scene stepping, compiled against reference;
  ``convexsim bench``, ``python -m convexsim.tools.bench``).
* ``bench_lcp``: the LCP stepper's benchmark tables (``convexsim bench``).
* ``bench_startup``: start-up time of the CLI by phase (``convexsim bench --startup``).
* ``compare_engines``: convexsim side by side with other engines (``convexsim bench --vs drake``).
* ``kernels``: the numba kernels: compile-time clock of a run, first-run notice, which are not cached.
* ``warmup``: compile every solver path's kernels ahead of time (``convexsim warmup``, ``make demo``).

Importing this package imports none of them.
"""
