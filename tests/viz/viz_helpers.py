"""Helpers of the viewer tests: scene paths, a synthetic trajectory, a browser page probe."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from convexsim.io.trajectory import Trajectory
from repo_paths import SCENES

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--enable-unsafe-swiftshader"]     # docs/viewer.md "Tests"

TWO_BODY_YAML = """
name: viz_two_bodies
time_step: 1.0e-3
duration: 1.0
bodies:
  - name: ground
    fixed: true
    color: [0.6, 0.6, 0.6]
    geometries: [{shape: halfspace}]
  - name: ball
    mass: 1.0
    position: [0, 0, 1.0]
    color: [0.9, 0.1, 0.1]
    geometries: [{shape: sphere, radius: 0.1}]
  - name: pill
    mass: 1.0
    inertia: [0.01, 0.01, 0.005]       # given: the shapes need not be centred on the body origin
    position: [0.5, 0, 0.1]
    color: [0.1, 0.2, 0.9]
    geometries: [{shape: capsule, radius: 0.05, length: 0.2}, {shape: box, size: [0.1, 0.1, 0.1], position: [0, 0, 0.2]}]
"""


def scene_path(name: str) -> Path:
    return SCENES / f"{name}.yaml"


def synthetic_trajectory(*, n_frames: int = 101, dt: float = 0.01, g: float = 9.81) -> Trajectory:
    """The two-body scene with a closed-form motion: the ball falls freely, z = 1 − g t²/2; the pill
    spins about z at 2 rad/s in place. Frame f has f % 3 contacts at the pill (forces (0, 0, 10·k) N
    for contact k, and one φ > 0 contact with zero force, which must not be shown)."""
    t = np.arange(n_frames) * dt
    B = 3
    pos = np.zeros((n_frames, B, 3))
    quat = np.zeros((n_frames, B, 4))
    quat[:, :, 0] = 1.0
    pos[:, 1] = [0.0, 0.0, 1.0]
    pos[:, 1, 2] = 1.0 - 0.5 * g * t**2
    pos[:, 2] = [0.5, 0.0, 0.1]
    quat[:, 2, 0] = np.cos(t)          # rotation angle 2t about z: (cos t, 0, 0, sin t)
    quat[:, 2, 3] = np.sin(t)
    counts, rows = [], []
    for f in range(n_frames):
        nc = f % 3
        for k in range(nc):
            rows.append(([0.5 + 0.01 * k, 0.0, 0.0], [0.0, 0.0, 10.0 * (k + 1)], -1e-4))
        rows.append(([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], 0.02))      # a gap contact: not drawn
        counts.append(nc + 1)
    K = len(rows)
    return Trajectory(
        time=t, body_names=np.array(["ground", "ball", "pill"]), position=pos, quaternion=quat,
        linear_velocity=np.zeros((n_frames, B, 3)), angular_velocity=np.zeros((n_frames, B, 3)),
        solver_iterations=np.zeros(n_frames, np.int64), solver_converged=np.ones(n_frames, bool),
        momentum_residual=np.zeros(n_frames), line_search_evaluations=np.zeros(n_frames, np.int64),
        contact_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        contact_body_a=np.zeros(K, np.int64), contact_body_b=np.full(K, 2, np.int64),
        contact_point=np.array([r[0] for r in rows]), contact_normal=np.tile([0.0, 0.0, 1.0], (K, 1)),
        contact_phi=np.array([r[2] for r in rows]), contact_force=np.array([r[1] for r in rows]),
        scene_yaml=TWO_BODY_YAML, solver_kind="sap", contact_model="sap", time_step=dt)



class PageProbe:
    """A page plus the errors it logged (favicon 404s ignored)."""

    def __init__(self, browser, url: str, size=(800, 600), *, offline: bool = False):
        self.page = browser.new_page(viewport={"width": size[0], "height": size[1]})
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: m.type == "error" and "favicon" not in m.text
                     and self.errors.append(m.text))
        if offline:                    # no network: every request other than file: / data: fails
            def route(r):
                if r.request.url.startswith(("file:", "data:", "blob:")):
                    r.continue_()
                else:
                    self.blocked.append(r.request.url)
                    r.abort()
            self.page.route("**/*", route)
        self.page.goto(url)

    def wait_for_body(self, group: str, body: str, timeout_ms: int = 20000) -> None:
        """Wait for CONTENT (not load): a mesh under meshcat/<group>/bodies/<body>."""
        self.page.wait_for_function(
            """([g, b]) => { const m = window.viewer && viewer.scene_tree.children.meshcat;
                 const grp = m && m.children[g]; const bs = grp && grp.children.bodies;
                 const n = bs && bs.children[b];
                 return !!n && Object.values(n.children).some(c => c.children['<object>'] &&
                        c.children['<object>'].object.isMesh); }""",
            arg=[group, body], timeout=timeout_ms)

    def bodies(self) -> dict:
        return self.page.evaluate(
            """() => { const m = viewer.scene_tree.children.meshcat, out = {};
                 for (const g of Object.keys(m.children)) { const b = m.children[g].children.bodies;
                   if (b) out[g] = Object.keys(b.children); }
                 return out; }""")

    def screenshot(self) -> np.ndarray:
        from io import BytesIO

        from PIL import Image

        self.page.evaluate("() => { viewer.set_dirty(); }")
        self.page.wait_for_timeout(150)
        return np.asarray(Image.open(BytesIO(self.page.screenshot())).convert("RGB")).astype(np.int16)

    def close(self) -> None:
        self.page.close()


def without_body(traj: Trajectory, body: str, scene_name: str) -> Trajectory:
    """A copy of ``traj`` as a run of another scene (``scene_name``) that lacks ``body``."""
    import yaml

    data = yaml.safe_load(traj.scene_yaml)
    data["name"] = scene_name
    data["bodies"] = [bd for bd in data["bodies"] if bd["name"] != body]
    keep = np.array([str(n) != body for n in traj.body_names])
    # contacts with the removed body go; the others get the new body indices (load_trajectory checks them)
    new_index = np.cumsum(keep) - 1
    rows = keep[traj.contact_body_a] & keep[traj.contact_body_b]
    frame_of_row = np.repeat(np.arange(traj.num_frames), np.diff(traj.contact_offsets))
    offsets = np.concatenate([[0], np.cumsum(np.bincount(frame_of_row[rows], minlength=traj.num_frames))])
    contacts = {"contact_offsets": offsets.astype(np.int64),
                "contact_body_a": new_index[traj.contact_body_a[rows]], "contact_body_b": new_index[traj.contact_body_b[rows]],
                **{k: getattr(traj, k)[rows] for k in ("contact_point", "contact_normal", "contact_phi", "contact_force")}}
    return Trajectory(**{**traj.__dict__, **contacts, "scene_yaml": yaml.safe_dump(data),
                         "body_names": np.asarray(traj.body_names)[keep],
                         "position": traj.position[:, keep], "quaternion": traj.quaternion[:, keep],
                         "linear_velocity": traj.linear_velocity[:, keep],
                         "angular_velocity": traj.angular_velocity[:, keep]})


def commands_in_page(html: str) -> list[dict]:
    """The meshcat commands embedded in an exported page (base64 msgpack strings), decoded."""
    import base64
    import re

    import umsgpack

    block = html[html.index("const cmds=["):]
    block = block[:block.index("];")]
    return [umsgpack.unpackb(base64.b64decode(b)) for b in re.findall(r'"([A-Za-z0-9+/=]+)"', block)]
