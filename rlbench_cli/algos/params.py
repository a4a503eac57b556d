"""An algorithm's params as the types of their defaults.

Params come from YAML or JSON: ``3e-4`` is a string to YAML 1.1, ``64.0`` a float, ``1`` may mean true.
``coerce`` turns a value into the type of the param's default (a bool, an int, a float, a string, a list of
ints) or raises ValueError naming the algorithm, the param and the value, so ``rlbench validate`` and
``rlbench run`` refuse a value a run would fail on before anything is recorded. Each adapter's
``split_params`` / ``settings_of`` calls it, so the check and the run read a param the same way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["INT_LIST", "coerce", "coerce_all"]

INT_LIST: list[int] = []  # the kind of a param whose default is None and whose value is a list of ints


def coerce(algo: str, name: str, value: Any, default: Any, optional: bool = False) -> Any:
    """``value`` as the type of ``default``: a bool (also from "true"/"false", 0, 1), an int (also from an
    integral float or numeric string), a float (also from an int or numeric string), a string, or, for a tuple
    or list default, a tuple or list of ints (one number is a list of one). ``optional``: None is a value too.
    A default of another type (None, a dict) takes the value as it is. Raises ValueError otherwise."""
    if value is None and optional:
        return None
    try:
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            if isinstance(value, (int, float)) and value in (0, 1):
                return bool(value)
            raise TypeError
        if isinstance(default, int):
            return _int(value)
        if isinstance(default, float):
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        if isinstance(default, (tuple, list)):
            items = [value] if isinstance(value, (int, float, str)) else list(value)
            return type(default)(_int(v) for v in items)
        if isinstance(default, str):
            if not isinstance(value, str):
                raise TypeError
            return value
    except (TypeError, ValueError):
        kind = "int list" if isinstance(default, (tuple, list)) else type(default).__name__
        raise ValueError(f"{algo} param {name!r} must be a{'n' if kind[0] == 'i' else ''} {kind}"
                         f"{' or null' if optional else ''}, got {value!r}") from None  # fmt: skip
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError
    f = float(value)
    if not f.is_integer():
        raise TypeError
    return int(f)


def coerce_all(algo: str, params: dict[str, Any], defaults: dict[str, Any],
               kinds: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """Every param of ``params`` that ``defaults`` names, coerced to its default's type. ``kinds``: params
    that may be null, each with a sample of its type (for a default of None, e.g. ``{"hidden_units":
    INT_LIST, "target_return": 0.0}``); a param with a None default and no kind is taken as it is."""
    kinds = kinds or {}
    out = dict(params)
    for k, v in params.items():
        if k not in defaults:
            continue
        if k in kinds:
            out[k] = coerce(algo, k, v, kinds[k], optional=True)
        elif defaults[k] is not None:
            out[k] = coerce(algo, k, v, defaults[k])
    return out
