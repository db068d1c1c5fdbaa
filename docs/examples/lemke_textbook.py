"""Lemke's algorithm on a few textbook LCPs: statuses, pivots and solutions (docs/lcp.md §1).

Run: .venv/bin/python docs/examples/lemke_textbook.py
"""

import numpy as np

from convexsim.lcp import lemke

EXAMPLES = {
    "Siconos deudeu (SPD)": ([[2, 1], [1, 2]], [-5, -6], None),
    "Kostreva Ex. 1 (cycles without ties rule)": ([[1, 2, 0], [0, 1, 2], [2, 0, 1]], [-1, -1, -1], None),
    "CPS 4.4.16 (needs z0-first)": ([[1, -1], [-1, 1]], [1, -1], None),
    "Murty Ex. 2.11, d = e": ([[-1.5, 2], [-4, 4]], [-5, 17], None),
    "Murty Ex. 2.11, d = (5, 16)": ([[-1.5, 2], [-4, 4]], [-5, 17], [5, 16]),
    "skew infeasible (ray proves it)": ([[0, 1], [-1, 0]], [-1, -1], None),
}


def main():
    for name, (M, q, d) in EXAMPLES.items():
        r = lemke(M, q, d=d)
        print(f"{name:45s} {r.status.name:14s} pivots {r.pivots:3d}  z = {np.round(r.z, 6).tolist()}")
    n = 8
    M = np.triu(np.full((n, n), 2.0), 1) + np.eye(n)
    q = -np.array([sum(2.0**j for j in range(i, n + 1)) for i in range(1, n + 1)])
    r = lemke(M, q, max_pivots=10_000)
    print(f"Murty exponential n = {n}: {r.status.name}, {r.pivots} pivots (2^n = {2**n})")


if __name__ == "__main__":
    main()
