"""Reading, validating, overriding and writing scene files.

Every problem with a scene is reported as one line ``<source>: <field path>: <what is wrong>
(got <value>)``, with the field path written as in the file, e.g. ``bodies[2].geometries[0].radius``,
and all problems of a file are reported at once (:class:`SceneError`).

Overrides are dotted paths applied to the raw mapping before validation, so the result is
validated like a file: ``bodies.ball.mass=2`` (list elements by ``name`` or by index, also
``bodies[0].mass``), ``materials.default.stiffness=1e5``, ``solver.kind=lcp``. Values are parsed
as YAML scalars or flow sequences (``gravity=[0, 0, -1.62]``).
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import types
import typing
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from convexsim.errors import InputError, SceneWarning
from convexsim.scene.schema import (
    DEFAULT_MATERIAL,
    FieldProblems,
    SceneSpec,
    cross_reference_problems,
    format_loc,
    unit_problems,
)

Loc = tuple[str | int, ...]


class SceneError(InputError):
    """A scene could not be loaded. ``problems`` holds one message per problem.

    Each message names the source (file), the field path, the bad value and what is allowed.
    """

    def __init__(self, problems: list[str], source: str = "<scene>"):
        self.problems = list(problems)
        self.source = source
        n = len(self.problems)
        head = f"{source}: {n} problem{'s' if n != 1 else ''} in scene"
        super().__init__(head + "\n" + "\n".join(f"  - {p}" for p in self.problems))


class UnitWarning(SceneWarning):
    """A scene value almost surely in the wrong unit (outside ``convexsim.scene.schema.UNIT_RANGES``).
    Silenced by ``unit_warnings: false`` in the scene, ``convexsim run --no-unit-warnings``, or
    ``warnings.simplefilter("ignore", UnitWarning)``."""


# ---------------------------------------------------------------------------------------------
# Schema navigation (for messages and override paths)
# ---------------------------------------------------------------------------------------------


def _unwrap(tp: Any) -> Any:
    """Strip Annotated[...] and Optional[...] down to the underlying type."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _child(tp: Any, seg: str | int) -> tuple[Any, Any]:
    """(type, FieldInfo or None) of element ``seg`` of a value of type ``tp``; (None, None) if unknown."""
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        info = tp.model_fields.get(seg) if isinstance(seg, str) else None
        return (info.annotation, info) if info is not None else (None, None)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and isinstance(seg, int):
        return args[0], None
    if origin is dict and isinstance(seg, str):
        return args[1], None
    if origin is tuple and isinstance(seg, int) and args:
        return (args[seg] if seg < len(args) else None), None
    return None, None


def _resolve(loc: Loc) -> tuple[Any, Any]:
    """Type at ``loc`` under SceneSpec and the innermost FieldInfo met on the way."""
    tp: Any = SceneSpec
    info = None
    for seg in loc:
        tp, sub = _child(tp, seg)
        info = sub or info
        if tp is None:
            break
    return tp, info


def _model_keys(tp: Any) -> list[str] | None:
    """Allowed keys of the model type ``tp``, or None when ``tp`` is not a model."""
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(tp.model_fields)
    return None


# ---------------------------------------------------------------------------------------------
# Error messages
# ---------------------------------------------------------------------------------------------


def _short(value: Any, limit: int = 80) -> str:
    """repr of a value, shortened for messages."""
    if isinstance(value, tuple):
        value = list(value)
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _body_hint(data: Any, loc: Loc) -> str:
    """' (body 'ball')' when loc points into a named element of bodies or grids."""
    if len(loc) >= 2 and loc[0] in ("bodies", "grids") and isinstance(loc[1], int) and isinstance(data, dict):
        items = data.get(loc[0])
        if isinstance(items, list) and 0 <= loc[1] < len(items) and isinstance(items[loc[1]], dict):
            name = items[loc[1]].get("name")
            if isinstance(name, str):
                return f" ({'body' if loc[0] == 'bodies' else 'grid'} {name!r})"
    return ""


def _node_line(node: Any, loc: Loc) -> int | None:
    """1-based line of the YAML node at ``loc`` (the deepest existing ancestor), or None."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for seg in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(seg, str):
            match = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == seg]
            if not match:
                break
            key, node = match[0]
            line = (key.start_mark.line if not isinstance(node, yaml.ScalarNode) else node.start_mark.line) + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and 0 <= seg < len(node.value):
            node = node.value[seg]
            line = node.start_mark.line + 1
        else:
            break
    return line


@dataclass
class _Context:
    """Where problems are reported: the source name, the raw data and (for files) the YAML node tree."""

    source: str
    data: Any
    node: Any = None


def _problem(ctx: _Context, loc: Loc, message: str, value: Any = None, show_value: bool = True) -> str:
    """One formatted problem line: '<source>[:line]: <path>[ (body 'x')]: <message> (got <value>)'."""
    path = format_loc(loc) or "<top level>"
    got = f" (got {_short(value)})" if show_value else ""
    line = _node_line(ctx.node, loc)
    where = f"{ctx.source}:{line}" if line is not None else ctx.source
    return f"{where}: {path}{_body_hint(ctx.data, loc)}: {message}{got}"


def _pydantic_problems(err: ValidationError, ctx: _Context) -> list[str]:
    """Turn a pydantic ValidationError into problem lines at full field paths."""
    out: list[str] = []
    for e in err.errors(include_url=False):
        loc: Loc = tuple(e["loc"])
        kind, msg, value = e["type"], e["msg"], e.get("input")
        err_ctx = e.get("ctx") or {}
        exc = err_ctx.get("error")
        if isinstance(exc, FieldProblems):
            for sub, sub_msg, sub_value in exc.problems:
                out.append(_problem(ctx, loc + tuple(sub), sub_msg, sub_value, sub_value is not None))
            continue
        if kind == "extra_forbidden":
            allowed = _model_keys(_resolve(loc[:-1])[0]) or []
            key = str(loc[-1])
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            out.append(
                _problem(ctx, loc, f"unknown key {key!r}{hint}; allowed keys here: {', '.join(allowed)}", show_value=False)
            )
            continue
        _, info = _resolve(loc)
        allowed = f" — {info.description}" if info is not None and info.description else ""
        if kind == "missing":
            out.append(_problem(ctx, loc, f"required field is missing{allowed}", show_value=False))
            continue
        if kind == "value_error":
            msg = msg.removeprefix("Value error, ")
            allowed = ""  # our own validators already say what is allowed
        out.append(_problem(ctx, loc, msg + allowed, value))
    return out


def _validate(data: Any, source: str, node: Any = None) -> SceneSpec:
    """Validate a raw mapping into a SceneSpec, or raise SceneError listing every problem."""
    ctx = _Context(source, data, node)
    if not isinstance(data, dict):
        raise SceneError([f"{source}: <top level>: a scene must be a mapping of keys to values (got {_short(data)})"], source)
    try:
        spec = SceneSpec.model_validate(data)
    except ValidationError as err:
        problems = _pydantic_problems(err, ctx)
    else:
        for loc, msg, value in unit_problems(spec):
            warnings.warn(UnitWarning(_problem(ctx, loc, msg, value) + " [unit check; `unit_warnings: false` "
                                      "in the scene silences it]"), stacklevel=4)
        return spec
    # Cross-references are checked by SceneSpec only when everything else is valid; check them on the
    # raw data too so that one run reports them alongside the other problems.
    for loc, msg, value in cross_reference_problems(data):
        line = _problem(ctx, loc, msg, value)
        if line not in problems:
            problems.append(line)
    prefix = re.compile(re.escape(source) + r":(\d+): ")
    problems.sort(key=lambda line: int(m.group(1)) if (m := prefix.match(line)) else 0)  # file order
    raise SceneError(problems, source)


# ---------------------------------------------------------------------------------------------
# Overrides
# ---------------------------------------------------------------------------------------------

_SEGMENT = re.compile(r"([^.\[\]]+)|\[(-?\d+)\]")


def _parse_path(path: str) -> list[str | int]:
    """'bodies[2].geometries.0.radius' -> ['bodies', 2, 'geometries', 0, 'radius']."""
    if not path or path.startswith(".") or path.endswith(".") or ".." in path:
        raise SceneError([f"<override>: {path!r}: not a dotted path such as 'bodies.ball.mass'"], "<override>")
    parts: list[str | int] = []
    pos = 0
    for m in _SEGMENT.finditer(path):
        gap = path[pos : m.start()]
        if gap not in ("", "."):
            raise SceneError([f"<override>: {path!r}: cannot parse near {gap!r}"], "<override>")
        name, index = m.groups()
        if index is not None:
            parts.append(int(index))
        elif re.fullmatch(r"-?\d+", name):
            parts.append(int(name))
        else:
            parts.append(name)
        pos = m.end()
    if pos != len(path):
        raise SceneError([f"<override>: {path!r}: cannot parse near {path[pos:]!r}"], "<override>")
    return parts


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads YAML 1.2 floats without a dot, such as ``1e6`` or ``-2E-3``."""


class _FastLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """``_Loader`` on libyaml's parser (PyYAML's C loader, ~10× faster) when PyYAML was built with it;
    the same resolvers and constructors, so the same data and node marks (line numbers). The tag of a
    plain scalar depends only on its text here (no path resolvers), so it is looked up once per text."""

    _scalar_tags: dict[str, str] = {}

    def resolve(self, kind, value, implicit):
        if kind is yaml.ScalarNode and implicit[0] and not self.yaml_path_resolvers:
            tag = self._scalar_tags.get(value)
            if tag is None:
                tag = self._scalar_tags[value] = super().resolve(kind, value, implicit)
                if len(self._scalar_tags) > 100_000:
                    self._scalar_tags.clear()
            return tag
        return super().resolve(kind, value, implicit)


class _Dumper(yaml.SafeDumper):
    """SafeDumper that quotes the strings ``_Loader`` would read as floats (a name ``1e3`` is written ``'1e3'``):
    what :func:`dump_scene` writes reads back the same."""


for _cls in (_Loader, _FastLoader, _Dumper):
    _cls.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )


def _yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)


def _parse_value(text: str) -> Any:
    """A YAML scalar or flow collection: '2' -> 2, '1e5' -> 100000.0, '[0, 0, -1]', 'lcp' -> 'lcp'."""
    try:
        return _yaml_load(text)
    except yaml.YAMLError as err:
        raise SceneError([f"<override>: cannot parse value {text!r} as YAML: {err}"], "<override>") from None


def _override_items(overrides: dict[str, Any] | list[str] | tuple[str, ...] | None) -> list[tuple[str, Any]]:
    """Normalize overrides to (path, value) pairs; 'a.b=c' strings get their value parsed as YAML."""
    if not overrides:
        return []
    if isinstance(overrides, dict):
        return list(overrides.items())
    items = []
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            raise SceneError([f"<override>: {item!r}: expected 'dotted.path=value', e.g. 'bodies.ball.mass=2'"], "<override>")
        path, _, text = item.partition("=")
        items.append((path.strip(), _parse_value(text.strip())))
    return items


def _list_index(items: list, seg: str | int, where: str, path: str) -> int:
    """Index of element ``seg`` (an index or a ``name``) in a list, or SceneError."""
    if isinstance(seg, int):
        if -len(items) <= seg < len(items):
            return seg % len(items)
        raise SceneError([f"<override>: {path}: index {seg} out of range for {where} ({len(items)} elements)"], "<override>")
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == seg:
            return i
    names = [str(it.get("name")) for it in items if isinstance(it, dict) and "name" in it]
    hint = ""
    if where == "bodies":
        hint = "; bodies made by a grid are changed through grids.<grid>.template"
    close = difflib.get_close_matches(str(seg), names, n=1)
    mean = f" (did you mean {close[0]!r}?)" if close else ""
    listing = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    raise SceneError([f"<override>: {path}: no element named {seg!r} in {where}{mean}; names: {listing or '(none)'}{hint}"], "<override>")


def _check_key(tp: Any, key: str | int, where: str, path: str) -> None:
    """Reject a key the schema does not have at this place."""
    keys = _model_keys(tp)
    if keys is not None and key not in keys:
        close = difflib.get_close_matches(str(key), keys, n=1)
        mean = f" (did you mean {close[0]!r}?)" if close else ""
        raise SceneError(
            [f"<override>: {path}: unknown key {key!r} in {where or 'the scene'}{mean}; allowed keys: {', '.join(keys)}"],
            "<override>",
        )


def _set_path(data: dict, path: str, value: Any) -> None:
    """Set ``value`` at dotted ``path`` in the raw scene mapping (creating missing mappings)."""
    parts = _parse_path(path)
    cur: Any = data
    tp: Any = SceneSpec
    done: list[str | int] = []
    for k, seg in enumerate(parts):
        last = k == len(parts) - 1
        where = format_loc(tuple(done))
        if isinstance(cur, list):
            idx = _list_index(cur, seg, where, path)
            tp, _ = _child(tp, idx)
            if last:
                cur[idx] = value
                return
            cur, seg = cur[idx], idx
        elif isinstance(cur, dict):
            if isinstance(seg, int):
                raise SceneError([f"<override>: {path}: {where or 'the scene'} is a mapping, not a list; use a key"], "<override>")
            _check_key(tp, seg, where, path)
            tp, _ = _child(tp, seg)
            if last:
                cur[seg] = value
                return
            if cur.get(seg) is None:
                nxt = _unwrap(tp) if tp is not None else None
                cur[seg] = [] if typing.get_origin(nxt) is list else {}
            cur = cur[seg]
        else:
            raise SceneError(
                [f"<override>: {path}: {where} holds {_short(cur)}, which has no element {seg!r}"], "<override>"
            )
        done.append(seg)


def apply_overrides(d: dict, overrides: dict[str, Any] | list[str] | None) -> dict:
    """A copy of raw scene mapping ``d`` with dotted-path overrides applied (validate it afterwards).

    Args:
        d: raw scene mapping, as read from YAML.
        overrides: ``{"bodies.ball.mass": 2.0}`` or ``["bodies.ball.mass=2", "solver.kind=lcp"]``
            (string values parsed as YAML). List elements are addressed by index or by ``name``.

    Raises:
        SceneError: a path that does not exist in the schema or the scene (with what does exist).
    """
    data = copy.deepcopy(d)
    items = _override_items(overrides)
    for path, value in items:
        _set_path(data, path, value)
    _warn_unused_materials(d, data, [path for path, _ in items])
    return data


def _used_materials(data: Any) -> set[str]:
    """Names of the materials the geometries of a raw scene mapping use (grid templates included)."""
    used: set[str] = set()
    bodies = data.get("bodies") if isinstance(data, dict) else None
    grids = data.get("grids") if isinstance(data, dict) else None
    templates = [b for b in bodies if isinstance(b, dict)] if isinstance(bodies, list) else []
    templates += [g.get("template") for g in grids if isinstance(g, dict)] if isinstance(grids, list) else []
    for body in templates:
        geoms = body.get("geometries") if isinstance(body, dict) else None
        for geom in geoms if isinstance(geoms, list) else []:
            if isinstance(geom, dict):
                used.add(str(geom.get("material", DEFAULT_MATERIAL)))
    return used


def _warn_unused_materials(before: dict, after: dict, paths: list[str]) -> None:
    """Warn (SceneWarning) for each override of ``materials.<name>...`` that no geometry uses: it changes
    nothing (e.g. ``materials.default.friction`` in a scene whose geometries all name other materials)."""
    used = _used_materials(after)
    defined = set(before.get("materials") or {}) | {DEFAULT_MATERIAL} if isinstance(before, dict) else set()
    for path in paths:
        parts = _parse_path(path)
        if len(parts) < 2 or parts[0] != "materials" or parts[1] in used:
            continue
        name = str(parts[1])
        new = "" if name in defined else f"; {name!r} is a new material{did_you_mean(name, sorted(defined))}"
        warnings.warn(SceneWarning(
            f"<override>: {path}: no geometry uses material {name!r}, so this changes nothing{new}; "
            f"the geometries use: {', '.join(sorted(used)) or '(no geometries)'}"), stacklevel=4)


# ---------------------------------------------------------------------------------------------
# Loading and dumping
# ---------------------------------------------------------------------------------------------


MAX_YAML_DEPTH = 100
"""Deepest nesting of YAML collections a scene file may have (scenes need about 8)."""

MAX_YAML_EXPANSION = 100_000
"""Aliases may expand a file to at most ``10 × its own nodes + MAX_YAML_EXPANSION`` values: reusing an anchor
is fine, an alias bomb (anchors of anchors, 10⁹ values from a few lines) is refused before it is built."""


class _YamlShapeError(ValueError):
    """A YAML node graph too deep, too large once its aliases are expanded, or recursive (message, line)."""

    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


def _check_node_graph(root: Any) -> None:
    """Raise _YamlShapeError for a recursive alias, nesting deeper than MAX_YAML_DEPTH, or aliases that
    expand beyond the limit of MAX_YAML_EXPANSION. Iterative, and each node is visited once (memoized by
    identity), so checking is linear in the file whatever the aliases expand to."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]

    def children(node):
        if isinstance(node, yaml.SequenceNode):
            return node.value
        if isinstance(node, yaml.MappingNode):
            return [n for pair in node.value for n in pair]
        return []

    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            kids = children(node)
            size[nid] = 1 + sum(size[id(c)] for c in kids)
            height[nid] = 1 + max((height[id(c)] for c in kids), default=0)
            visiting.discard(nid)
            if height[nid] > MAX_YAML_DEPTH:
                raise _YamlShapeError(f"collections nested more than {MAX_YAML_DEPTH} deep", node.start_mark.line + 1)
            if size[nid] > 10 * len(size) + MAX_YAML_EXPANSION:
                raise _YamlShapeError(f"aliases expand to more than {size[nid]} values from {len(size)} written "
                                      "ones (an alias bomb?)", node.start_mark.line + 1)
            continue
        if nid in size:
            continue
        if nid in visiting:
            raise _YamlShapeError("an alias refers to a collection that contains it (a recursive structure)",
                                  node.start_mark.line + 1)
        visiting.add(nid)
        stack.append((node, True))
        stack.extend((c, False) for c in children(node))
        if len(stack) > 10 * MAX_YAML_EXPANSION:
            raise _YamlShapeError("too many values", node.start_mark.line + 1)


def _compose_and_construct(text: str, loader_class: type) -> tuple[Any, Any]:
    """(data, node tree) of YAML text from one parse: the node tree, checked (:func:`_check_node_graph`),
    then the data built from it."""
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_node_graph(node)
        return loader.construct_document(node), node
    finally:
        loader.dispose()


def _read_yaml(text: str, source: str) -> tuple[Any, Any]:
    """Parse YAML text into (data, node tree); syntax errors become a SceneError with the line number.

    One parse with the C loader when available; invalid YAML is parsed again by the pure-Python loader so
    that the message (line, column, problem) does not depend on how PyYAML was built."""
    try:
        try:
            data, node = _compose_and_construct(text, _FastLoader)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            if "nesting depth" in str(err) and mark is not None:   # libyaml's limit (1000): the Python
                raise _YamlShapeError(f"collections nested more than {MAX_YAML_DEPTH} deep",   # loader would
                                      mark.line + 1) from None                              # recurse slowly
            data, node = _compose_and_construct(text, _Loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}: line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).replace(' in "<unicode string>",', ",")
        raise SceneError([f"{source}{where}: invalid YAML: {' '.join(problem.split())}"], source) from None
    except _YamlShapeError as err:
        raise SceneError([f"{source}:{err.line}: YAML refused: {err}"], source) from None
    except RecursionError:
        raise SceneError([f"{source}: YAML refused: collections nested too deeply "
                          f"(at most {MAX_YAML_DEPTH} levels)"], source) from None
    except ValueError as err:        # a value YAML's constructors cannot build (e.g. a 5000-digit integer)
        raise SceneError([f"{source}: invalid YAML value: {' '.join(str(err).split())}"], source) from None
    duplicates = _duplicate_keys(node, ())
    if duplicates:
        raise SceneError(
            [f"{source}:{line}: {format_loc(loc)}: key {key!r} appears twice in the same mapping (first on line "
             f"{first}); YAML would silently keep only the last one" for loc, key, line, first in duplicates],
            source,
        )
    return ({} if data is None else data), node


def parse_scene_yaml(text: str, source: str) -> tuple[Any, Any]:
    """(data, node tree) of scene YAML text, not validated, through the scene reader's checks (syntax,
    duplicate keys, nesting depth, recursive aliases, alias bombs); SceneError naming ``source`` otherwise.
    ``load_trajectory`` checks a trajectory's ``scene_yaml`` with it."""
    return _read_yaml(text, source)


def _duplicate_keys(node: Any, loc: Loc) -> list[tuple[Loc, str, int, int]]:
    """(path, key, line, first line) of every key repeated within one YAML mapping, depth first."""
    out: list[tuple[Loc, str, int, int]] = []
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key)
            line = key.start_mark.line + 1
            if name in seen:
                out.append((loc + (name,), name, line, seen[name]))
            else:
                seen[name] = line
            out.extend(_duplicate_keys(value, loc + (name,)))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out.extend(_duplicate_keys(item, loc + (i,)))
    return out


def scene_from_dict(
    d: dict, source: str = "<dict>", overrides: dict[str, Any] | list[str] | None = None, *, _node: Any = None
) -> SceneSpec:
    """Validate a raw scene mapping (after optional overrides) into a SceneSpec; SceneError otherwise."""
    data = apply_overrides(d, overrides) if overrides else d
    return _validate(data, source, _node)


def scene_from_yaml(text: str, source: str = "<string>", overrides: dict[str, Any] | list[str] | None = None) -> SceneSpec:
    """Parse and validate scene YAML text; SceneError otherwise."""
    data, node = _read_yaml(text, source)
    return scene_from_dict(data, source, overrides, _node=node)


def shipped_scenes_dir() -> Path:
    """The shipped scenes folder: the installed data package ``convexsim.scenes`` (the repository's top-level
    ``scenes/``, mapped into the package by the build: the same folder for a wheel, an editable install and
    a checkout installed with ``make install``).

    Raises:
        FileNotFoundError: the package has no ``convexsim.scenes`` (a checkout used without installing it,
            or an installation from a zip file), with what to do.
    """
    from importlib import resources

    try:
        root = resources.files("convexsim.scenes")
    except ModuleNotFoundError:
        raise FileNotFoundError("the shipped scenes (package convexsim.scenes) are not installed: install "
                                "convexsim (`pip install .`, or `pip install -e .` in a checkout)") from None
    if not isinstance(root, Path):
        raise FileNotFoundError(f"the shipped scenes are not a folder on disk ({root}); install convexsim "
                                "unzipped (pip does)")
    return root


_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def _description(path: Path) -> str:
    """The first sentence of a scene file's comment header (its first paragraph, joined over the lines it is
    wrapped on), without the '#'s; '' without a header."""
    words: list[str] = []
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                text = line.strip()
                if not text and not words:
                    continue
                if not text.startswith("#") or not text.lstrip("#").strip():
                    break                       # the header's first paragraph ends
                words.append(text.lstrip("#").strip())
                end = _SENTENCE_END.search(" ".join(words))
                if end:
                    return " ".join(words)[: end.end()]
    except (OSError, UnicodeDecodeError):
        pass
    return " ".join(words)


def list_scenes(directory: str | Path | None = None) -> list[tuple[str, str, Path]]:
    """Shipped (or given directory's) scenes as (name, one-line description, path), sorted by name.

    The description is the first line of the file's comment header.
    """
    root = Path(directory) if directory is not None else shipped_scenes_dir()
    if not root.is_dir():
        return []
    files = sorted(set(root.glob("*.yaml")) | set(root.glob("*.yml")))
    return [(p.stem, _description(p), p) for p in files]


def did_you_mean(name: str, candidates: Any) -> str:
    """' (did you mean 'x'?)' for the closest of ``candidates`` to ``name`` (difflib ratio >= 0.6), or ''."""
    close = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def shipped_scene_path(name: str) -> Path:
    """Path of shipped scene ``name`` (``scenes/<name>.yaml``); a path to an existing file is returned as is.

    Raises:
        FileNotFoundError: no such scene, with the closest shipped name and the list of shipped ones.
    """
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml") and _exists(candidate, file=True):
        return candidate
    stem = candidate.stem if candidate.suffix in (".yaml", ".yml") else str(name)
    for ext in (".yaml", ".yml"):
        p = shipped_scenes_dir() / f"{stem}{ext}"
        if _exists(p, file=True):
            return p
    shipped = [n for n, _, _ in list_scenes()]
    raise FileNotFoundError(f"no shipped scene named {_clip(str(name))!r}{did_you_mean(stem, shipped)}; "
                            f"shipped scenes: {', '.join(shipped) or '(none found)'}")


def resolve_scene_path(scene: str | Path) -> Path:
    """The scene file a user means by ``scene``, tried in this order:

    1. a path as given (relative paths against the working directory), file or not (so that a
       directory is reported as such by the reader);
    2. a relative path against the shipped scenes folder, also with a leading ``scenes/`` dropped, so
       ``scenes/box_stack.yaml`` works from any directory;
    3. a shipped scene name, ``box_stack`` or ``box_stack.yaml``.

    Raises:
        FileNotFoundError: none of these exists; the message names the closest shipped scene.
    """
    path = Path(scene)
    if _exists(path):
        return path
    if not path.is_absolute():
        root = shipped_scenes_dir()
        parts = path.parts
        tails = [path] + ([Path(*parts[1:])] if len(parts) > 1 and parts[0] == root.name else [])
        for tail in tails:
            if _exists(root / tail):
                return root / tail
    if len(path.parts) == 1:
        stem = path.stem if path.suffix in (".yaml", ".yml") else path.name
        for ext in (".yaml", ".yml"):
            if _exists(shipped_scenes_dir() / f"{stem}{ext}", file=True):
                return shipped_scenes_dir() / f"{stem}{ext}"
    raise FileNotFoundError(f"scene not found: {_not_found_hint(path)}")


def _exists(path: Path, file: bool = False) -> bool:
    """``path.exists()`` (``is_file()`` with ``file``), False for a name the OS refuses (too long, NUL
    byte) instead of an OSError."""
    try:
        return path.is_file() if file else path.exists()
    except (OSError, ValueError):
        return False


_MAPPING_START = re.compile(r"\s*(?:\{|---|[^\s#{}\[\],][^\n]*?:(?:\s|$))")


def is_scene_text(scene: Any) -> bool:
    """True when the string ``scene`` is YAML text rather than a path or a shipped scene name: it has a
    newline, or it starts with a mapping (``{``, ``---`` or ``key:`` followed by a space or the end).
    ``C:\\scenes\\a.yaml`` and ``box_stack`` are names; ``"bodies: []"`` is text."""
    return isinstance(scene, str) and ("\n" in scene or _MAPPING_START.match(scene) is not None)


def _clip(text: str, limit: int = 120) -> str:
    """``text`` shortened to ``limit`` characters for messages (a very long "name" is usually not one)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _not_found_hint(path: Path) -> str:
    """What to tell a user whose scene argument ``path`` names nothing: the closest shipped scene or sibling
    file, and where to find the shipped names."""
    shipped = [n for n, _, _ in list_scenes()]
    if len(path.parts) == 1 and path.suffix.lower() not in ("", ".yaml", ".yml"):     # a robot file's name
        try:
            siblings = [p.name for p in Path.cwd().iterdir()]
        except OSError:
            siblings = []
        return f"no such file {_clip(str(path))!r} in {Path.cwd()}{did_you_mean(path.name, siblings)}"
    if len(path.parts) == 1:
        stem = path.stem if path.suffix in (".yaml", ".yml") else path.name
        return (f"{_clip(str(path))!r} is neither a file nor a shipped scene{did_you_mean(stem, shipped)}; "
                f"shipped scenes: {', '.join(shipped) or '(none found)'}")
    try:
        siblings = [p.name for p in path.parent.glob("*.y*ml")] if path.parent.is_dir() else []
    except (OSError, ValueError):
        siblings = []
    hint = did_you_mean(path.name, siblings) or did_you_mean(path.stem, shipped)
    return f"no file {_clip(str(path))!r}{hint}; shipped scenes: `convexsim scenes`"


def _read_scene_text(path: Path) -> str:
    """The text of a scene file; SceneError naming the file when it cannot be read as UTF-8 text."""
    source = str(path)
    if path.is_dir():
        raise SceneError([f"{source}: cannot read scene file: it is a directory, not a YAML file"], source)
    try:
        raw = path.read_bytes()
    except OSError as err:
        reason = (err.strerror or str(err)).lower()
        raise SceneError([f"{source}: cannot read scene file: {reason}"], source) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SceneError([f"{source}: not a text (YAML) file: byte 0x{raw[err.start]:02x} at offset "
                          f"{err.start} is not UTF-8"], source) from None


def load_scene(path: str | Path, overrides: dict[str, Any] | list[str] | None = None) -> SceneSpec:
    """Load and validate a scene file; SceneError (a ValueError) listing every problem otherwise.

    ``path`` is found as :func:`resolve_scene_path` does: a path relative to the working directory, else
    relative to the shipped scenes folder, else a shipped scene name (``"box_stack"``). A scene without
    a ``name`` is named after its file (``scenes/box_stack.yaml`` -> ``box_stack``).
    """
    data, node, source = read_scene_file(path)
    return scene_from_dict(data, source, overrides, _node=node)


def read_scene_file(path: str | Path) -> tuple[Any, Any, str]:
    """(raw data, YAML node tree, source name) of a scene file, found as :func:`resolve_scene_path`
    does, not validated; a scene without a ``name`` gets its file's stem. SceneError when the file is
    missing, unreadable, empty or not YAML."""
    try:
        path = resolve_scene_path(path)
    except FileNotFoundError:
        hint = _not_found_hint(Path(path))
        what = "file" if Path(path).suffix.lower() in (".urdf", ".xml") else "scene file"
        raise SceneError([f"{_clip(str(path))}: cannot read {what}: {hint}"], _clip(str(path))) from None
    source = str(path)
    if path.suffix.lower() == ".urdf":          # a robot description: converted (convexsim.scene.urdf)
        from convexsim.scene.urdf import UrdfError, urdf_to_scene
        try:
            return urdf_to_scene(path), None, source
        except UrdfError as exc:
            raise SceneError(exc.problems, source) from None
    if path.suffix.lower() == ".xml":           # a MuJoCo model: converted (convexsim.scene.mjcf)
        from convexsim.scene.mjcf import MjcfError, mjcf_to_scene
        try:
            return mjcf_to_scene(path), None, source
        except MjcfError as exc:
            raise SceneError(exc.problems, source) from None
    text = _read_scene_text(path)
    data, node = _read_yaml(text, source)
    if data == {} and _yaml_load(text) is None:
        raise SceneError([f"{source}: the file is empty; a scene needs at least `bodies:` "
                          "(docs/scene-format.md)"], source)
    if isinstance(data, dict) and "name" not in data:
        stem = re.sub(r"[.=\[\]\s]", "_", path.stem) or "scene"
        data = {"name": stem, **data}
    resolve_mesh_files(data, path.parent)
    return data, node, source


def resolve_mesh_files(data: Any, folder: Path) -> None:
    """Make the relative ``file`` of every mesh geometry (bodies and grid templates) of a raw scene mapping
    absolute, taken from ``folder`` (the scene file's folder); in place. Tolerates any structure."""
    if not isinstance(data, dict):
        return
    holders = list(data.get("bodies") or []) if isinstance(data.get("bodies"), list) else []
    if isinstance(data.get("grids"), list):
        holders += [g.get("template") for g in data["grids"] if isinstance(g, dict)]
    for body in holders:
        geoms = body.get("geometries") if isinstance(body, dict) else None
        for geom in geoms if isinstance(geoms, list) else []:
            f = geom.get("file") if isinstance(geom, dict) else None
            if isinstance(f, str) and f and not Path(f).expanduser().is_absolute():
                geom["file"] = str((folder / Path(f).expanduser()).resolve())


def read_scene_data(scene: Any, text_source: str = "<string>") -> tuple[Any, Any, str]:
    """(raw data, YAML node tree or None, source name) of a scene given as a path or shipped scene name,
    YAML text (:func:`is_scene_text`), a mapping or a SceneSpec; not validated (a SceneSpec's data is its
    resolved form). Parsing happens once: validate the result with ``scene_from_dict(data, source,
    _node=node)`` to get problems with line numbers."""
    if isinstance(scene, SceneSpec):
        return scene.model_dump(mode="json", exclude_none=True), None, f"<scene {scene.name!r}>"
    if isinstance(scene, typing.Mapping):
        return dict(scene), None, "<scene>"
    if is_scene_text(scene):
        data, node = _read_yaml(scene, text_source)
        return data, node, text_source
    if isinstance(scene, (str, os.PathLike)):
        return read_scene_file(scene)
    raise TypeError(f"a scene is a path, a shipped scene name, YAML text, a mapping or a SceneSpec, "
                    f"not {type(scene).__name__}")


def with_overrides(spec: SceneSpec, overrides: dict[str, Any] | list[str] | None, source: str | None = None) -> SceneSpec:
    """A new, validated SceneSpec: ``spec`` with dotted-path overrides applied (see apply_overrides).

    Example: ``with_overrides(spec, {"materials.default.stiffness": 1e5, "solver.sigma": 1e-4})``.
    """
    if not overrides:
        return spec
    data = spec.model_dump(mode="json", exclude_none=True)
    return scene_from_dict(data, source or f"<scene {spec.name!r}>", overrides)


def _ordered(d: dict, first: tuple[str, ...]) -> dict:
    """Same mapping with the keys in ``first`` moved to the front."""
    return {**{k: d[k] for k in first if k in d}, **{k: v for k, v in d.items() if k not in first}}


def dump_scene(spec: SceneSpec) -> str:
    """The fully resolved scene (all defaults filled in, grids kept compact) as YAML text.

    ``scene_from_yaml(dump_scene(spec)) == spec`` (floats are written with full precision).
    """
    d = spec.model_dump(mode="json", exclude_none=True)
    d["bodies"] = [_ordered(b, ("name",)) for b in d["bodies"]]
    return yaml.dump(d, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=10_000, allow_unicode=True)


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(-?)(Infinity|NaN)\b|(?<![\d.])(-?\d+)([eE][-+]?\d+)')

_JSON_SUSPECT = re.compile(r"\d[eE]|Infinity|NaN")


def _yaml_number(m: re.Match) -> str:
    """A JSON token as YAML 1.1 reads it: strings as they are, ``1e-05`` -> ``1.0e-05``,
    ``Infinity`` -> ``.inf``."""
    if m.group(2):
        return m.group(1) + (".inf" if m.group(2) == "Infinity" else ".nan")
    if m.group(3):
        return f"{m.group(3)}.0{m.group(4)}"
    return m.group(0)


def _flow(value: Any) -> str:
    """``value`` (JSON types) as a one-line YAML flow node: JSON with floats every YAML 1.1 reader parses
    as floats (``yaml.safe_load`` needs a dot in ``1.0e-05``)."""
    text = json.dumps(value, ensure_ascii=False)
    return _JSON_TOKEN.sub(_yaml_number, text) if _JSON_SUSPECT.search(text) else text


def dump_scene_compact(spec: SceneSpec) -> str:
    """The fully resolved scene as compact YAML: one line per top-level key, body and grid, each value a
    JSON flow node. What trajectory files store (``scene_yaml``): ~100× faster to write than
    :func:`dump_scene` for a thousand bodies, and ``scene_from_yaml(dump_scene_compact(spec)) == spec``
    (floats written by ``repr``, which round-trips)."""
    d = spec.model_dump(mode="json", exclude_none=True)
    d["bodies"] = [_ordered(b, ("name",)) for b in d["bodies"]]
    lines = []
    for key, value in d.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            lines.append(f"{key}:")
            lines.extend(f"- {_flow(item)}" for item in value)
        else:
            lines.append(f"{key}: {_flow(value)}")
    return "\n".join(lines) + "\n"


__all__ = [
    "SceneError",
    "dump_scene_compact",
    "is_scene_text",
    "read_scene_data",
    "read_scene_file",
    "load_scene",
    "scene_from_dict",
    "scene_from_yaml",
    "parse_scene_yaml",
    "apply_overrides",
    "dump_scene",
    "with_overrides",
    "resolve_scene_path",
    "shipped_scene_path",
    "shipped_scenes_dir",
    "list_scenes",
    "did_you_mean",
    "SceneWarning",
    "UnitWarning",
]
