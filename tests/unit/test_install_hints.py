"""Every install command a message of rlbench_cli names is one that works: the package is rlbench-cli (not
rlbench) and each extra it names is one of pyproject.toml's optional-dependencies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as tomli
    tomllib = pytest.importorskip("tomli")

pytestmark = pytest.mark.fast

ROOT = Path(__file__).parents[2]
# `pip install [-U] TARGET`, TARGET maybe quoted: rlbench-cli, 'rlbench-cli[s3]', "rlbench-cli[ray]", boto3
_COMMAND = re.compile(
    r"""pip install (?:-U |--upgrade )?(?P<q>['"]?)(?P<target>[A-Za-z0-9_.\-]+(?:\[[^\]]*\])?)(?P=q)"""
)
_REQUIREMENT = re.compile(r"[A-Za-z0-9_.\-]+")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def install_commands() -> list[tuple[str, str]]:
    """``(file:line, target)`` of every ``pip install`` in rlbench_cli's source."""
    found = []
    for path in sorted((ROOT / "rlbench_cli").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for m in _COMMAND.finditer(line):
                found.append((f"{path.relative_to(ROOT)}:{number}", m.group("target")))
            assert line.count("pip install") == len(_COMMAND.findall(line)), (
                f"{path.relative_to(ROOT)}:{number}: a pip install this test cannot read: {line.strip()}"
            )
    return found


def test_install_commands_name_rlbench_cli_and_its_extras():
    project = _project()
    extras = project["optional-dependencies"]
    packages = {
        _REQUIREMENT.match(req).group(0).lower()
        for reqs in [project["dependencies"], *extras.values()]
        for req in reqs
    }
    commands = install_commands()
    assert len(commands) >= 5, commands  # the scan finds the messages (ray, slurm, s3, text, imagine, ...)
    for where, target in commands:
        name, _, rest = target.partition("[")
        if name.lower() != project["name"]:
            assert not name.lower().startswith("rlbench"), (
                f"{where}: {target!r}: the package is {project['name']}"
            )
            assert name.lower() in packages, f"{where}: {target!r} is no dependency of {project['name']}"
            continue
        for extra in filter(None, rest.rstrip("]").split(",")):
            assert extra.strip() in extras, f"{where}: {target!r}: no extra {extra!r} in pyproject.toml"


@pytest.mark.parametrize("extra", ["text", "imagine", "s3", "ray", "slurm"])
def test_each_optional_feature_names_its_extra(extra):
    assert (f"rlbench-cli[{extra}]") in {target for _, target in install_commands()}
