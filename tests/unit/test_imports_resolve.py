"""Every import inside rlbench_cli names something that exists, lazy ones in functions included: a module moved
into a package leaves no `from .old import name` behind to fail only when that function first runs.

Relative and absolute imports of rlbench_cli's own modules are read from the source (tests/unit/
test_architecture.py's reader); every module is imported and each imported name looked up in it."""

from __future__ import annotations

import importlib
import importlib.util

from test_architecture import modules, own_imports

# modules that need an optional engine to import at all (imported lazily where they are used)
NEEDS = {"rlbench_cli.executors.ray.actor": "ray"}


def test_every_own_import_names_a_module_or_a_name_that_exists():
    known = modules()
    broken = []
    for module, line, target, names in own_imports(known):
        if target not in known:
            broken.append(f"{module}:{line}: no module {target}")
            continue
        if target in NEEDS and importlib.util.find_spec(NEEDS[target]) is None:
            continue
        for name in names or ():
            if (
                name != "*"
                and f"{target}.{name}" not in known
                and not hasattr(importlib.import_module(target), name)
            ):
                broken.append(f"{module}:{line}: {target} has no {name}")
    assert not broken, "imports that would fail when they run:\n" + "\n".join(broken)
