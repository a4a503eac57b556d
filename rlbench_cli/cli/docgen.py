"""The CLI reference (docs/cli.md), generated from the Typer app, and what the documentation tests read.

``render`` writes every command with its description, usage, arguments and options, each with the help text
and default that ``rlbench COMMAND --help`` prints (the same help records click formats there).
``tests/unit/test_docs.py`` checks the committed file is this output, so a new command or option, or a changed
help text, is a failing test until the file is regenerated with

    python -m rlbench_cli.cli.docgen > docs/cli.md

``undocumented`` names the commands and options the manual's prose (README.md and docs/, cli.md aside) does not
mention, and ``runnable_examples`` reads the ``rlbench`` lines of the code blocks marked ``<!-- runnable -->``,
which ``tests/e2e/test_docs_examples.py`` runs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUNNABLE = "<!-- runnable -->"

HEADER = """# CLI reference

Every command and option of `rlbench`, as `rlbench COMMAND --help` prints them. This file is generated from
the command-line app by `python -m rlbench_cli.cli.docgen > docs/cli.md`; do not edit it by hand
(`tests/unit/test_docs.py` fails when it differs from the app). The other pages of the [manual](README.md)
explain what the commands are for.
"""


def command_tree() -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """``(path, command, context)`` for the app and every command under it, depth first in the order the app
    lists them (``()`` is ``rlbench`` itself; ``("datasets", "build")`` is ``rlbench datasets build``)."""
    from typer.main import get_command

    from .app import app

    def walk(path: tuple[str, ...], command: Any, parent: Any) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
        ctx = command.make_context(" ".join(("rlbench", *path)), [], parent=parent, resilient_parsing=True)
        yield path, command, ctx
        for name, sub in getattr(command, "commands", {}).items():
            if not sub.hidden:
                yield from walk((*path, name), sub, ctx)

    yield from walk((), get_command(app), None)


def options(command: Any, ctx: Any) -> list[tuple[str, list[str], str]]:
    """``(kind, names, help)`` of each parameter of ``command`` that ``--help`` shows: kind ``argument`` or
    ``option``, names its flags (``["--curves", "--no-curves"]``) or its name, help as ``--help`` has it."""
    out = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or param.name == "help":
            continue
        names = [*param.opts, *param.secondary_opts] if param.param_type_name == "option" else [param.name]
        out.append((param.param_type_name, names, record))
    return out


def _text(paragraph: str) -> str:
    """A paragraph of help text as Markdown: one line, ``<``/``>``/``*`` escaped, an example command in code."""
    line = " ".join(paragraph.split())
    example = re.match(r"^(Example[^:]*: )(rlbench [^`]*)$", line)
    prose, code = (example.group(1), f"`{example.group(2)}`") if example else (line, "")
    return prose.replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*") + code


def _short(help_text: str, limit: int = 100) -> str:
    """The first paragraph of a help text, cut at a word to about ``limit`` characters."""
    first = " ".join(re.split(r"\n\s*\n", help_text.strip())[0].split())
    if len(first) <= limit:
        return first
    return first[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", r"\|")


def render() -> str:
    """docs/cli.md: the header, a list of the commands, then a section per command."""
    tree = list(command_tree())
    lines = [HEADER]
    for path, command, _ in tree[1:]:
        short = _short(command.help or "")
        name = " ".join(("rlbench", *path))
        anchor = name.replace(" ", "-")
        lines.append(f"{'  ' * (len(path) - 1)}- [`{name}`](#{anchor}): {_cell(short)}")
    lines.append("")
    for path, command, ctx in tree:
        name = " ".join(("rlbench", *path))
        lines += [f"{'#' * (2 if len(path) <= 1 else 3)} {name}", ""]
        for paragraph in re.split(r"\n\s*\n|\n(?=\s*Example)", (command.help or "").strip()):
            if paragraph.strip():
                lines += [_text(paragraph), ""]
        lines += ["```text", f"{name} {' '.join(command.collect_usage_pieces(ctx))}", "```", ""]
        rows = options(command, ctx)
        if rows:
            lines += ["| argument or option | what it does |", "| --- | --- |"]
            for _, _, (flags, help_text) in rows:
                lines.append(f"| `{_cell(flags)}` | {_cell(help_text) or ' '} |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def manual_pages(root: str | Path) -> list[Path]:
    """The manual's prose: README.md, then docs/*.md in name order, the generated docs/cli.md left out."""
    root = Path(root)
    return [root / "README.md", *sorted(p for p in (root / "docs").glob("*.md") if p.name != "cli.md")]


def _named(name: str, text: str) -> bool:
    """``name`` (``rlbench fetch``, ``--limit``) occurs in ``text`` as a whole word: ``--x`` is not ``--xlabel``."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def undocumented(prose: str) -> list[str]:
    """Each command (``rlbench datasets build``) and option (``rlbench fetch --limit``) of the app that
    ``prose`` never names; an option counts as named when any of its long flags is (``--no-curves``)."""
    missing = []
    for path, command, ctx in command_tree():
        name = " ".join(("rlbench", *path))
        if path and not _named(name, prose):
            missing.append(name)
        for kind, names, _ in options(command, ctx):
            flags = [n for n in names if n.startswith("--")]
            if kind == "option" and flags and not any(_named(f, prose) for f in flags):
                missing.append(f"{name} {flags[0]}")
    return missing


@dataclass(frozen=True)
class Example:
    """One ``rlbench`` line of a runnable block: where it is, and the line as written."""

    doc: str
    line: int
    text: str

    @property
    def argv(self) -> list[str]:
        """The line as a command's arguments (a ``# comment`` dropped, quotes as the shell reads them)."""
        return shlex.split(self.text, comments=True)

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


def runnable_examples(path: str | Path, root: str | Path) -> list[Example]:
    """The ``rlbench`` lines of the fenced code blocks that follow a ``<!-- runnable -->`` line in ``path``
    (``doc`` named relative to ``root``). A line may start with ``$ ``; a line ending in ``\\`` goes on on the
    next. ValueError, naming the file and line, for a marker without a block or a line that is not ``rlbench``."""
    doc = Path(path).relative_to(root).as_posix()
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    out: list[Example] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != RUNNABLE:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j == len(lines) or not lines[j].lstrip().startswith("```"):
            raise ValueError(f"{doc}:{i + 1}: {RUNNABLE} must be followed by a fenced code block")
        j += 1
        pending, start = "", 0
        while j < len(lines) and not lines[j].lstrip().startswith("```"):
            text = lines[j].strip().removeprefix("$ ")
            if not pending:
                start = j + 1
            if text.endswith("\\"):
                pending += text[:-1] + " "
            else:
                text, pending = pending + text, ""
                if text and not text.startswith("#"):
                    if not text.startswith("rlbench "):
                        raise ValueError(
                            f"{doc}:{start}: a runnable block holds only rlbench commands: {text}"
                        )
                    out.append(Example(doc, start, text))
            j += 1
        i = j + 1
    return out


if __name__ == "__main__":
    print(render(), end="")
