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
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from convexsim.scene.schema import FieldProblems, SceneSpec, cross_reference_problems, format_loc

Loc = tuple[str | int, ...]


class SceneError(ValueError):
    """A scene could not be loaded. ``problems`` holds one message per problem.

    Each message names the source (file), the field path, the bad value and what is allowed.
    """

    def __init__(self, problems: list[str], source: str = "<scene>"):
        self.problems = list(problems)
        self.source = source
        n = len(self.problems)
        head = f"{source}: {n} problem{'s' if n != 1 else ''} in scene"
        super().__init__(head + "\n" + "\n".join(f"  - {p}" for p in self.problems))


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
        return SceneSpec.model_validate(data)
    except ValidationError as err:
        problems = _pydantic_problems(err, ctx)
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


_Loader.add_implicit_resolver(
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
    for path, value in _override_items(overrides):
        _set_path(data, path, value)
    return data


# ---------------------------------------------------------------------------------------------
# Loading and dumping
# ---------------------------------------------------------------------------------------------


def _read_yaml(text: str, source: str) -> tuple[Any, Any]:
    """Parse YAML text into (data, node tree); syntax errors become a SceneError with the line number."""
    try:
        data = _yaml_load(text)
        node = yaml.compose(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}: line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise SceneError([f"{source}{where}: invalid YAML: {problem}"], source) from None
    duplicates = _duplicate_keys(node, ())
    if duplicates:
        raise SceneError(
            [f"{source}:{line}: {format_loc(loc)}: key {key!r} appears twice in the same mapping (first on line "
             f"{first}); YAML would silently keep only the last one" for loc, key, line, first in duplicates],
            source,
        )
    return ({} if data is None else data), node


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


def load_scene(path: str | Path, overrides: dict[str, Any] | list[str] | None = None) -> SceneSpec:
    """Load and validate a scene file; SceneError (a ValueError) listing every problem otherwise.

    A scene without a ``name`` is named after its file (``scenes/box_stack.yaml`` -> ``box_stack``).
    """
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SceneError([f"{source}: cannot read scene file: {err.strerror or err}"], source) from None
    data, node = _read_yaml(text, source)
    if isinstance(data, dict) and "name" not in data:
        stem = re.sub(r"[.=\[\]\s]", "_", path.stem) or "scene"
        data = {"name": stem, **data}
    return scene_from_dict(data, source, overrides, _node=node)


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
    return yaml.safe_dump(d, sort_keys=False, default_flow_style=None, width=10_000, allow_unicode=True)


__all__ = [
    "SceneError",
    "load_scene",
    "scene_from_dict",
    "scene_from_yaml",
    "apply_overrides",
    "dump_scene",
    "with_overrides",
]
