"""Small scenes shared by the inverse tests."""

GROUND = {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace", "material": "floor"}]}


def slider(contact_model="sap", *, dt=0.02, duration=0.6, mu=0.3, k=1e5, tau_d=0.01, z0=0.15, vx=0.0):
    """The Berard–Trinkle particle in 3D: a unit-mass sphere (r = 0.1 m, inertia 1e6 kg·m² so that it does
    not roll) pushed along +x by 5 N (as gravity's x component) falls onto a halfspace and slides.
    Two equal materials, so the combined values are μ, k/2, 2τ_d."""
    mat = {"friction": mu, "stiffness": k, "dissipation_time": tau_d, "hunt_crossley_dissipation": 5.0}
    puck = {"name": "puck", "mass": 1.0, "inertia": [1e6, 1e6, 1e6], "position": [0, 0, z0],
            "linear_velocity": [vx, 0, 0],
            "geometries": [{"shape": "sphere", "radius": 0.1, "material": "puck"}]}
    return {"name": "slider", "time_step": dt, "duration": duration, "gravity": [5.0, 0, -9.81],
            "contact_model": contact_model, "materials": {"floor": dict(mat), "puck": dict(mat)},
            "solver": {"friction_directions": 4}, "bodies": [GROUND, puck]}


def rolling_ball(contact_model="sap", *, dt=0.01):
    """A solid ball (rolls: friction couples translation and rotation) thrown onto a halfspace."""
    mat = {"friction": 0.4, "stiffness": 1e5, "dissipation_time": 0.01, "hunt_crossley_dissipation": 5.0}
    ball = {"name": "ball", "mass": 1.0, "position": [0, 0, 0.3], "linear_velocity": [0.5, 0.2, 0],
            "geometries": [{"shape": "sphere", "radius": 0.1, "material": "ball"}]}
    return {"name": "ball", "time_step": dt, "duration": 0.4, "gravity": [5.0, 0, -9.81],
            "contact_model": contact_model, "materials": {"floor": dict(mat), "ball": dict(mat)},
            "bodies": [GROUND, ball]}


def tripod_block(contact_model="sap", *, dt=0.02, duration=0.5, mu=0.3, k=1e5, tau_d=0.01, vx=1.0):
    """A 1 kg block (0.3 × 0.2 × 0.1 m) resting on three small spheres ("feet", r = 1 cm) at (0.1, 0),
    (−0.1, ±0.07) m below its COM, pushed along +x by 5 N (gravity's x component) and started sliding at
    vx. Three support points under the COM make the normal forces statically determinate
    (N₁ = N₂ + N₃ = m g/2, N₂ = N₃); they slide together, so ẍ = 5 − μ g. Two equal materials."""
    mat = {"friction": mu, "stiffness": k, "dissipation_time": tau_d, "hunt_crossley_dissipation": 5.0}
    m, (a, b, c) = 1.0, (0.3, 0.2, 0.1)
    inertia = [m * (b * b + c * c) / 12, m * (a * a + c * c) / 12, m * (a * a + b * b) / 12]
    feet = [{"shape": "sphere", "radius": 0.01, "material": "felt", "position": p}
            for p in ([0.1, 0.0, -0.05], [-0.1, 0.07, -0.05], [-0.1, -0.07, -0.05])]
    block = {"name": "block", "mass": m, "inertia": inertia, "position": [0, 0, 0.06],
             "linear_velocity": [vx, 0, 0], "geometries": feet}
    return {"name": "tripod_block", "time_step": dt, "duration": duration, "gravity": [5.0, 0, -9.81],
            "contact_model": contact_model, "materials": {"floor": dict(mat), "felt": dict(mat)},
            "solver": {"friction_directions": 4}, "bodies": [GROUND, block]}
