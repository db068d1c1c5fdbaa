"""Inline playback in Jupyter (convexsim.viz.show): the recorded page, with its controls, in an iframe.

What Jupyter does with an object is IPython's display formatter: it asks for ``_repr_html_`` and puts that in
the cell's output. The tests take that output, check that the iframe holds exactly the standalone page that
``export_html`` writes for the same runs (so the controls, legend and frames are those of the recorded page),
and (browser) that Chromium plays it inside the iframe.
"""

from __future__ import annotations

import base64
import html
import re

import numpy as np
import pytest

from convexsim.viz import InlinePlayback, export_html, show

SRCDOC = re.compile(r'<iframe [^>]*srcdoc="([^"]*)"[^>]*></iframe>', re.S)


def _cell_output(obj) -> str:
    """The text/html a Jupyter cell shows for ``obj`` as its last expression."""
    from IPython.core.formatters import DisplayFormatter

    data, _ = DisplayFormatter().format(obj)
    return data["text/html"]


def _page_in(output: str) -> str:
    match = SRCDOC.fullmatch(output)
    assert match, output[:200]
    return html.unescape(match.group(1))


UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
COMMANDS = re.compile(r"const cmds=\[\n(.*?)\n\];", re.S)


def _same_page(a: str, b: str) -> bool:
    """Two standalone pages are the same recording: the same page around the drawing commands, and the same
    commands (base64 msgpack) up to the random UUIDs meshcat gives each object when it is built."""
    (cmds_a,), (cmds_b,) = COMMANDS.findall(a), COMMANDS.findall(b)

    def decoded(cmds: str) -> list[bytes]:
        return [UUID.sub(b"<uuid>", base64.b64decode(x.strip().strip('"'))) for x in cmds.split(",\n")]

    return (COMMANDS.sub("", a) == COMMANDS.sub("", b) and len(decoded(cmds_a)) > 1
            and decoded(cmds_a) == decoded(cmds_b))


def test_a_trajectory_shows_inline_as_the_recorded_page(two_body_traj, tmp_path):
    view = show(two_body_traj, autoplay=False)
    assert isinstance(view, InlinePlayback)
    page = _page_in(_cell_output(view))
    exported = export_html([two_body_traj], tmp_path / "p.html", autoplay=False).read_text(encoding="utf-8")
    assert _same_page(page, exported)
    assert view.save(tmp_path / "saved.html").read_text(encoding="utf-8") == page


def test_a_list_shows_side_by_side_with_both_labels(two_body_traj, tmp_path):
    runs = [two_body_traj, two_body_traj]
    view = show(runs, labels=["SAP", "LCP"], layout="offset", height=600)
    output = _cell_output(view)
    assert "height:600px" in output
    page = _page_in(output)
    exported = export_html(runs, tmp_path / "p.html", labels=["SAP", "LCP"], layout="offset")
    assert _same_page(page, exported.read_text(encoding="utf-8"))
    assert "SAP" in view.title and "LCP" in view.title
    assert sum(view.playback.frames) > 0 and view.playback.duration == pytest.approx(two_body_traj.time[-1])


def test_bad_options_are_named(two_body_traj):
    with pytest.raises(TypeError, match="colour"):
        show(two_body_traj, colour="red")
    with pytest.raises(ValueError, match="height"):
        show(two_body_traj, height=5)


@pytest.mark.browser
def test_the_inline_page_plays_inside_its_iframe(two_body_traj, tmp_path, open_page):
    """A notebook's output area is an HTML page holding the iframe: Chromium loads the viewer inside it (no
    network), the bodies are drawn and the animation has the recording's duration."""
    host = tmp_path / "cell.html"
    host.write_text("<!DOCTYPE html><html><body>" + _cell_output(show(two_body_traj, autoplay=False))
                    + "</body></html>", encoding="utf-8")
    probe = open_page(host.as_uri(), offline=True)
    frame = probe.page.frame_locator("iframe")
    frame.locator("#meshcat-pane").wait_for(timeout=20000)
    inner = probe.page.frames[1]
    inner.wait_for_function("() => window.convexsim_loaded === true", timeout=20000)
    duration = inner.evaluate("() => viewer.animator.duration")
    assert np.isclose(duration, two_body_traj.time[-1], rtol=1e-6)
    assert not probe.errors and not probe.blocked
