"""Suite files: ``load_suite(path)`` reads YAML (plain data only, no key twice), ``parse_suite`` validates
it against the schema (``suite.models``) and the registries (``suite.checks``); every problem is one
``SuiteInvalid`` line naming file, field and fix.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import SuiteInvalid
from .checks import check_suite, printable
from .models import Suite

__all__ = ["format_validation_error", "load_suite", "parse_suite"]

_FIXES = {
    "extra_forbidden": "remove it or check its spelling",
    "missing": "add it",
    "int_type": "use a whole number",
    "int_parsing": "use a whole number",
    "int_from_float": "use a whole number",
    "float_type": "use a number",
    "float_parsing": "use a number",
    "string_type": "use a text value",
    "list_type": "use a list, e.g. [a, b]",
    "dict_type": "use a mapping, e.g. {key: value}",
    "greater_than": "use a larger value",
    "greater_than_equal": "use a larger value",
    "less_than_equal": "use a smaller value",
    "too_short": "list at least one",
    "model_type": "use a mapping, e.g. {key: value}",
}


def _field_path(loc: tuple[Any, ...], data: Any) -> str:
    """Turn pydantic's loc into the path a user sees in the file (algorithms[1].params)."""
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("int", "list[int]", "str", "function-after[_eval_every_default(), Budget]"):
            continue  # union branch names, not fields
        elif isinstance(item, str) and ("[" in item or "(" in item):
            continue
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(top level)"


def format_validation_error(path: str, err: ValidationError, data: Any) -> str:
    e = err.errors()[0]
    field = printable(_field_path(tuple(e["loc"]), data))
    msg = e["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if e["type"] == "extra_forbidden":
        msg = "unknown field"
    fix = _FIXES.get(e["type"])
    got = ""
    if (
        "input" in e
        and e["type"] not in ("missing", "extra_forbidden")
        and not isinstance(e["input"], dict | list)
    ):
        got = f" (got {e['input']!r})"
    line = f"{path}: field '{field}': {msg}{got}"
    if fix:
        line += f"; {fix}"
    more = len(err.errors()) - 1
    if more:
        line += f" [+{more} more problem{'s' if more > 1 else ''}]"
    return line


def parse_suite(data: Any, path: str = "<suite>", default_name: str | None = None) -> Suite:
    """Validate already-parsed YAML data. Raises SuiteInvalid with a one-line message."""
    if data is None:
        raise SuiteInvalid(f"{path}: the file is empty; a suite needs at least 'envs' and 'algorithms'")
    if not isinstance(data, dict):
        raise SuiteInvalid(
            f"{path}: a suite must be a YAML mapping (key: value lines), not a {type(data).__name__}"
        )
    not_plain = _not_plain(data, "", set())
    if not_plain:
        raise SuiteInvalid(f"{path}: field '{printable(not_plain[0])}': {not_plain[1]}")
    if not data.get("envs") and not data.get("datasets"):
        how = "add it" if "envs" not in data else "list at least one"
        raise SuiteInvalid(f"{path}: field 'envs': a suite needs envs (online tasks) or datasets (offline "
                           f"tasks); {how}")  # fmt: skip
    if "name" not in data and default_name is not None:
        data = {"name": default_name, **data}
    try:
        suite = Suite.model_validate(data)
    except ValidationError as err:
        raise SuiteInvalid(format_validation_error(path, err, data)) from None
    check_suite(suite, path)
    return suite


def _not_plain(value: Any, where: str, open_ids: set[int]) -> tuple[str, str] | None:
    """(field, problem) of the first value that is not plain JSON-like data: YAML dates, !!binary, !!set, or
    a container holding itself through an alias. Runs are identified by the JSON of their config."""
    if value is None or isinstance(value, str | int | float):
        return None
    if isinstance(value, dict | list):
        if id(value) in open_ids:
            return where or "(top level)", "contains itself through a YAML alias (*name); write the value out"
        open_ids.add(id(value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(value, list):
                at = f"{where}[{key}]"
            else:
                at = f"{where}.{key}" if where else str(key)
            found = _not_plain(item, at, open_ids)
            if found:
                return found
        open_ids.discard(id(value))
        return None
    if isinstance(value, datetime.date):
        what = f"the date {value}"
    else:
        what = {bytes: "binary data (!!binary)", set: "a set (!!set)"}.get(type(value), type(value).__name__)
    return where or "(top level)", (
        f"{what} is not plain data (text, numbers, true/false, lists, mappings); quote it to keep it as text"
    )


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file. Every problem is one line naming file, field and fix."""
    p = Path(path)
    if p.is_dir():
        raise SuiteInvalid(f"{p}: is a folder; pass a suite file such as suites/quickstart.yaml")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteInvalid(f"{p}: no such suite file; check the path (ready suites are in suites/)") from None
    except UnicodeDecodeError:
        raise SuiteInvalid(f"{p}: not a text file; a suite is a UTF-8 YAML file") from None
    except OSError as e:
        raise SuiteInvalid(f"{p}: cannot read it ({e.strerror}); check its permissions") from None
    try:
        data = yaml.load(text, Loader=_SuiteLoader)  # safe_load's loader, refusing duplicate keys
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if isinstance(e, _DuplicateKey):
            raise SuiteInvalid(f"{p}: {where}{problem}") from None
        tag = re.match(r"could not determine a constructor for the tag '([^']*)'", problem)
        if tag:
            name = tag.group(1).replace("tag:yaml.org,2002:", "!!")
            raise SuiteInvalid(f"{p}: {where}invalid YAML: the tag {name!r} is not allowed (a suite is plain "
                               "data, nothing in it is run); remove the tag") from None  # fmt: skip
        fix = "indent with spaces, not tabs" if "'\\t'" in problem else "fix the syntax there"
        raise SuiteInvalid(f"{p}: {where}invalid YAML ({problem}); {fix}") from None
    except RecursionError:
        raise SuiteInvalid(f"{p}: nested too deeply; check for unbalanced brackets") from None
    except Exception as e:  # PyYAML's scalar constructors: int() of 4300+ digits, '!!int' with no value, ...
        if "4300" in str(e):
            raise SuiteInvalid(f"{p}: a number of more than 4300 digits; use a smaller number") from None
        raise SuiteInvalid(f"{p}: invalid YAML (a value does not fit its type: {type(e).__name__}: {e}); "
                           "check values with explicit tags such as !!int or !!float") from None  # fmt: skip
    try:
        return parse_suite(data, str(p), default_name=p.stem)
    except RecursionError:
        raise SuiteInvalid(f"{p}: nested too deeply; check for unbalanced brackets") from None


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


class _SuiteLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader (plain data only, no Python tags) that refuses a key given twice in one
    mapping, which YAML itself would resolve silently by keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = self.construct_object(key_node)
                if key in seen:
                    raise _DuplicateKey(
                        None, None, f"key {key!r} is given twice (first on line {seen[key]}); keep one",
                        key_node.start_mark,
                    )  # fmt: skip
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)
