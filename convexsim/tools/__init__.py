"""convexsim.tools: the tools around the simulator, each run by a CLI command; no module of the step path
imports them (the compile-time clock of a run, ``KernelClock``, lives beside the kernel decorator in
``convexsim._kernel_clock``).

* ``bench``: SAP benchmarks (random problems by size, scene stepping, compiled against reference;
  ``convexsim bench``, ``python -m convexsim.tools.bench``).
* ``bench_lcp``: the LCP stepper's benchmark tables (``convexsim bench``).
* ``bench_startup``: start-up time of the CLI by phase (``convexsim bench --startup``).
* ``compare_engines``: convexsim side by side with other engines (``convexsim bench --vs drake``).
* ``kernels``: the numba kernels of the CLI: which are not cached (``convexsim._kernel_clock`` re-exported).
* ``warmup``: compile every solver path's kernels ahead of time (``convexsim warmup``, ``make demo``).

Importing this package imports none of them.
"""
