"""The integers the compiled steps and their Python side agree on: the status codes of the steps and their run
loops (read by the compositions ``sap_composition``, ``lcp_composition``, by the runners that turn a code into
a result, a Handoff or an error, and by the run loop of ``simulate``), and the slots of the LCP steps'
settings arrays (filled by ``packing.LcpPacked``, read by ``lcp_solve``). Plain integers, no imports: numba
folds them into the kernels as constants, and a kernel that reads them depends on this file only."""

from __future__ import annotations

# ---- a SAP step (sap_composition.step_prepare / step_finish)
STEP_OK = 0
STEP_NONFINITE_START = 1
STEP_NONFINITE_END = 2
STEP_TOO_LARGE = 3
STEP_SOLVER_FAILED = 4     # not converged and strict, or not converged with a non-finite v
STEP_BAD_MARGIN = 5        # a margin share is not finite (the reference path raises its ValueError)
STEP_SINGULAR_MASS = 6     # a tree's M(q) + dt·D is not positive definite in double precision (bad: a dof of it)
STEP_STATUS_NAMES = ("ok", "non-finite start state", "non-finite end state",
                     "an island above the dense limit (packing.ISLAND_MAX_DOFS)", "solver failed",
                     "a margin share is not finite", "a tree's mass matrix is singular to round-off")

# ---- a run loop (sap_composition.run_kernel), besides the STEP_* failure codes
RUN_DONE = 0
RUN_NEED_CONTACT_SPACE = 10
RUN_CHUNK_END = 11

# ---- an LCP step (lcp_composition.lcp_step_kernel)
LCP_OK = 0
LCP_NONFINITE_START = 1      # non-finite q or v, or margin shares: the reference path reports it
LCP_LEMKE_FAILED = 2         # the first Lemke run did not solve an island: the reference path runs the chain
LCP_TOO_LARGE = 3            # an island above the dense-assembly work: the reference assembles it sparsely
LCP_WARM_SIZE = 4            # warm start on and the LCP of warm-start size: the reference path warm-starts it
LCP_NONFINITE_DATA = 5       # non-finite M or q (the reference's Lemke raises its ValueError)
LCP_NONFINITE_END = 6        # non-finite new state
LCP_SINGULAR_MASS = 7        # as STEP_SINGULAR_MASS (where: a dof of the tree): the step raises, no reference
LCP_STATUS_NAMES = ("ok", "non-finite start state", "first Lemke run failed", "island above the dense size",
                    "warm-start size", "non-finite LCP data", "non-finite end state",
                    "a tree's mass matrix is singular to round-off")

# slots of the Lemke options array ``lpar`` (``lemke.LemkeOptions`` fields)
L_PIVOT_TOL = 0
L_RATIO_REL_TOL = 1
L_RHS_TOL = 2
L_LEX_REL_TOL = 3
L_LEX_ABS_TOL = 4
L_CHECK_TOL = 5
L_HARRIS_TOL = 6
L_HARRIS_RATIO = 7
NLPAR = 8

# slots of the LCP steps' integer settings array ``jpar``
J_NDIR = 0            # friction_directions d (0 = frictionless)
J_MAX_PIVOTS = 1      # solver.lcp_max_pivots (≤ 0: max(1000, 50 n))
J_WARM_MIN = 2        # WARM_MIN_SIZE with the warm start on, −1 off
J_DENSE_WORK = 3      # DENSE_ASSEMBLY_WORK
J_REFACTOR = 4        # LemkeOptions.refactor_every (−1: max(50, 2n))
J_HARRIS = 5          # 1 Harris ratio test, 0 textbook
J_LU_MAX = 6          # lemke.REBUILD_LU_MAX
NJPAR = 7

__all__ = ["STEP_OK", "STEP_NONFINITE_START", "STEP_NONFINITE_END", "STEP_TOO_LARGE", "STEP_SOLVER_FAILED",
           "STEP_BAD_MARGIN", "STEP_SINGULAR_MASS", "STEP_STATUS_NAMES", "RUN_DONE", "RUN_NEED_CONTACT_SPACE",
           "RUN_CHUNK_END", "LCP_OK", "LCP_NONFINITE_START", "LCP_LEMKE_FAILED", "LCP_TOO_LARGE", "LCP_WARM_SIZE",
           "LCP_NONFINITE_DATA", "LCP_NONFINITE_END", "LCP_SINGULAR_MASS", "LCP_STATUS_NAMES", "L_PIVOT_TOL",
           "L_RATIO_REL_TOL", "L_RHS_TOL", "L_LEX_REL_TOL", "L_LEX_ABS_TOL", "L_CHECK_TOL", "L_HARRIS_TOL",
           "L_HARRIS_RATIO", "NLPAR", "J_NDIR", "J_MAX_PIVOTS", "J_WARM_MIN", "J_DENSE_WORK", "J_REFACTOR",
           "J_HARRIS", "J_LU_MAX", "NJPAR"]
