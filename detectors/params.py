"""Parameters as data: a detector's parameters (its frozen dataclass) set at run time, checked first.

``parse_changes(detector, ["min_count=4", ...])`` turns ``key=value`` words into typed values, checked
against the dataclass: the name must be a field, the value must read as the field's type (int, float,
text, a comma-separated list of text for a tuple, ``none`` where the type allows None) and fall in its
range. A field's range is its ``metadata["range"]`` (low, high, both inclusive; None = open) and its
allowed values ``metadata["choices"]``; without them a number must be finite and not negative. Fields
whose type is none of those (a loaded model) cannot be set. Anything else is refused with one line
(``ParamError``), before anything is written.

``tuned(detector, record)`` is the detector with a record's parameters and version (what the job runs
and what the what-if compares).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Iterable

from common.param_records import ParamRecord
from detectors.base import Detector


class ParamError(ValueError):
    """A parameter change that is refused; the message is one line for the analyst."""


def settable_fields(detector: Detector) -> dict[str, tuple[dataclasses.Field, Any]]:
    """name -> (field, type) of the parameters that can be set as data."""
    hints = typing.get_type_hints(type(detector.params))
    return {f.name: (f, hints[f.name]) for f in dataclasses.fields(detector.params)
            if f.compare and _kind(hints[f.name]) is not None}


def _kind(hint: Any) -> tuple[type, bool] | None:
    """(scalar type, None allowed) of a parameter's type; tuple[str, ...] is (tuple, False)."""
    args = typing.get_args(hint)
    optional = type(None) in args
    if optional:
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else None
    if typing.get_origin(hint) is tuple and typing.get_args(hint)[:1] == (str,):
        return tuple, optional
    if hint in (int, float, str, bool):
        return hint, optional
    return None


def parse_value(detector: Detector, name: str, text: str) -> Any:
    fields = settable_fields(detector)
    if name not in fields:
        all_names = [f.name for f in dataclasses.fields(detector.params)]
        why = "cannot be set at run time" if name in all_names else "is not one of its parameters"
        raise ParamError(f"{detector.name}: {name!r} {why}; settable: {', '.join(fields)}")
    field, hint = fields[name]
    kind, optional = _kind(hint)
    if optional and text.strip().lower() in ("none", "null", ""):
        return None
    value: Any
    try:
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError
            value = text.lower() == "true"
        elif kind is int:
            value = int(text)
        elif kind is float:
            value = float(text)
        elif kind is tuple:
            value = tuple(part.strip() for part in text.split(","))
            if not all(value):
                raise ValueError
        else:
            value = text
            if not value:
                raise ValueError
    except ValueError:
        wanted = {bool: "true or false", int: "a whole number", float: "a number",
                  tuple: "comma-separated names", str: "non-empty text"}[kind]
        raise ParamError(f"{detector.name}: {name} must be {wanted}, got {text[:40]!r}") from None
    _check_range(detector, name, field, value)
    return value


def _check_range(detector: Detector, name: str, field: dataclasses.Field, value: Any) -> None:
    choices = field.metadata.get("choices")
    if choices is not None:
        items = value if isinstance(value, tuple) else (value,)
        wrong = [item for item in items if item not in choices]
        if wrong:
            raise ParamError(f"{detector.name}: {name} takes {', '.join(map(str, choices))}; got {', '.join(wrong)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(value):
        raise ParamError(f"{detector.name}: {name} must be finite, got {value}")
    low, high = field.metadata.get("range", (0, None))
    if (low is not None and value < low) or (high is not None and value > high):
        span = f"{low if low is not None else '-inf'} .. {high if high is not None else 'inf'}"
        raise ParamError(f"{detector.name}: {name} must be within {span}, got {value}")


def parse_changes(detector: Detector, words: Iterable[str]) -> dict[str, Any]:
    """``["min_count=4", "max_amount=3.5"]`` -> ``{"min_count": 4, "max_amount": 3.5}``, checked."""
    changes: dict[str, Any] = {}
    for word in words:
        name, sep, text = word.partition("=")
        if not sep or not name.strip():
            raise ParamError(f"{detector.name}: expected NAME=VALUE, got {word[:40]!r}")
        if name.strip() in changes:
            raise ParamError(f"{detector.name}: {name.strip()} given twice")
        changes[name.strip()] = parse_value(detector, name.strip(), text.strip())
    if not changes:
        raise ParamError(f"{detector.name}: no change given (NAME=VALUE ...)")
    return changes


def as_data(detector: Detector) -> dict[str, Any]:
    """The settable parameters of ``detector`` as JSON values (tuples as lists)."""
    return {name: list(v) if isinstance(v := getattr(detector.params, name), tuple) else v
            for name in settable_fields(detector)}


def from_data(detector: Detector, data: dict[str, Any]) -> dict[str, Any]:
    """A record's ``params`` back to typed values, each checked as ``set`` checks it; ParamError when a
    record no longer fits the code (a parameter removed or retyped since it was set)."""
    known = settable_fields(detector)
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ParamError(f"{detector.name}: the record sets {', '.join(unknown)}, which the code no longer has")
    values = {}
    for name, value in data.items():
        text = ",".join(value) if isinstance(value, list) else ("none" if value is None else str(value))
        values[name] = parse_value(detector, name, text)
    return values


def tuned(detector: Detector, record: ParamRecord | None) -> Detector:
    """``detector`` running the parameters of ``record`` (and carrying its version); as is without one."""
    if record is None:
        return detector
    return dataclasses.replace(detector.with_params(**from_data(detector, record.params)),
                               params_version=record.version)


def changed(detector: Detector, changes: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """name -> (now, proposed) of the changes that differ from ``detector``'s parameters."""
    return {name: (getattr(detector.params, name), value) for name, value in changes.items()
            if getattr(detector.params, name) != value}
