"""Every import inside rlbench_cli names something that exists, lazy ones in functions included: a module moved
into a package leaves no `from .old import name` behind to fail only when that function first runs.

Relative and absolute imports of rlbench_cli's own modules are read from the source (tests/unit/
test_architecture.py's reader); every module is imported and each imported name looked up in it."""

from __future__ import annotations

import ast
import importlib
import importlib.util

from test_architecture import modules

# modules that need an optional engine to import at all (imported lazily where they are used)
NEEDS = {"rlbench_cli.executors.ray.actor": "ray"}


def _own_imports() -> list[tuple[str, int, str, str | None]]:
    """(module, line, imported module, name or None) for every import of an rlbench_cli module."""
    known = modules()
    found = []
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [
                    (module, node.lineno, a.name, None)
                    for a in node.names
                    if a.name.startswith("rlbench_cli")
                ]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                elif (node.module or "").startswith("rlbench_cli"):
                    target = node.module
                else:
                    continue
                found += [(module, node.lineno, target, a.name) for a in node.names]
    return found


def test_every_own_import_names_a_module_or_a_name_that_exists():
    known = modules()
    broken = []
    for module, line, target, name in _own_imports():
        if target not in known:
            broken.append(f"{module}:{line}: no module {target}")
            continue
        if name is None or name == "*" or f"{target}.{name}" in known:
            continue
        if target in NEEDS and importlib.util.find_spec(NEEDS[target]) is None:
            continue
        if not hasattr(importlib.import_module(target), name):
            broken.append(f"{module}:{line}: {target} has no {name}")
    assert not broken, "imports that would fail when they run:\n" + "\n".join(broken)
