"""The manual cannot go stale: README.md keeps the set-up commands CI runs and stays a five-minute read, every
command and option of ``rlbench`` is named in the manual's prose, docs/cli.md is what the app generates and
says what ``--help`` says, every link between the pages resolves, and the runnable blocks hold only ``rlbench``
commands on suites that exist (tests/e2e/test_docs_examples.py runs them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli import docgen
from rlbench_cli.cli.app import app

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = docgen.manual_pages(ROOT)
PROSE = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
# README's "Set up", exactly as a new user types them; .ci/run installs and tests as the second one says
SETUP = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && rlbench run suites/quickstart.yaml "
    "&& rlbench plot quickstart"
)
TESTS = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && python -m pytest -m fast -q '
    '&& python -m pytest -m "not fast" -q'
)
TOPICS = [
    "suites", "algorithms", "running", "storage", "statistics", "leaderboards", "importing", "offline", "text",
    "tuning", "ui", "benchmarks", "architecture", "cli",
]  # fmt: skip


def test_the_readme_shows_the_two_setup_commands_near_the_top_and_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to a page of docs/"
    top = lines[:40]
    assert f"    {SETUP}" in top, "README.md: the quickstart command, exactly, in its first 40 lines"
    assert f"    {TESTS}" in top, "README.md: the test command, exactly, in its first 40 lines"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert TESTS.split(" && python -m pytest")[0] in ci
    # README's two pytest commands, in its order, each through the exit-5 check: the fast tier fails a broken
    # change within a minute, then every other test runs (none twice)
    assert '\ntests -m fast -q\ntests -m "not fast" -q\n' in ci


def test_every_topic_has_its_page_in_the_index_and_the_readme():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    for topic in TOPICS:
        assert (ROOT / "docs" / f"{topic}.md").is_file(), topic
        assert f"]({topic}.md)" in index, f"docs/README.md does not link {topic}.md"
        assert f"](docs/{topic}.md)" in readme, f"README.md does not link docs/{topic}.md"
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")} - {"README"}
    assert pages == set(TOPICS), f"a page the index and this test do not list: {sorted(pages - set(TOPICS))}"


def test_every_command_and_option_is_named_in_the_manual():
    missing = docgen.undocumented(PROSE)
    assert not missing, (
        f"not named in README.md or docs/ (cli.md aside): {missing}; describe each on its topic's page"
    )


def test_an_option_left_out_of_the_manual_is_named():
    assert docgen.undocumented(re.sub(r"(?<![\w-])--limit(?![\w-])", "", PROSE)) == ["rlbench fetch --limit"]
    assert docgen.undocumented(PROSE.replace("rlbench cancel", "rlbench")) == ["rlbench cancel"]


def test_a_flag_counts_only_as_a_whole_word():
    assert not docgen._named("--x", "`--xlabel` and `--x-range`")
    assert docgen._named("--x", "`plot --x KEY`")
    assert not docgen._named("rlbench datasets", "rlbench datasets-v2")


def test_the_cli_reference_is_what_the_app_generates():
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == docgen.render(), (
        "docs/cli.md differs from the app; regenerate it: python -m rlbench_cli.cli.docgen > docs/cli.md"
    )


def _squeezed(text: str) -> str:
    return "".join(text.split())


def test_the_cli_reference_says_what_help_says():
    """Each option's description and default in docs/cli.md is in ``rlbench COMMAND --help`` as printed
    (whitespace aside: --help wraps its lines), and so is each command's description."""
    checked = 0
    for path, command, ctx in docgen.command_tree():
        result = CliRunner().invoke(app, [*path, "--help"])
        assert result.exit_code == 0, result.output
        shown = _squeezed(result.output)
        assert _squeezed(command.help or "") in shown, f"rlbench {' '.join(path)}: description"
        for _, names, (flags, help_text) in docgen.options(command, ctx):
            assert _squeezed(f"{flags}") in shown, f"rlbench {' '.join(path)} {names[0]}"
            assert _squeezed(help_text) in shown, (
                f"rlbench {' '.join(path)} {names[0]}: --help does not show {help_text!r}"
            )
            checked += 1
    assert checked > 100


# GitHub's heading anchors: lower case, punctuation but - and _ dropped, spaces as -
def _anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_every_link_of_the_manual_resolves():
    broken = []
    for page in [*PAGES, ROOT / "docs" / "cli.md"]:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            file, _, fragment = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken


def test_the_anchor_rule_is_githubs():
    assert _anchor("NeoRL-2's realism wrappers") == "neorl-2s-realism-wrappers"
    assert _anchor("Watch it live: `rlbench ui`") == "watch-it-live-rlbench-ui"
    assert _anchor("rlbench datasets build") == "rlbench-datasets-build"


def test_the_runnable_examples_are_rlbench_commands_on_suites_that_exist():
    examples = [e for page in PAGES for e in docgen.runnable_examples(page, ROOT)]
    tour = [e.argv[1] for e in examples if e.doc == "README.md"]
    for command in ("validate", "run", "status", "fetch", "sql", "plot", "leaderboard"):
        assert command in tour, f"README.md's runnable tour has no rlbench {command}"
    for e in examples:
        for arg in e.argv:
            if arg.startswith("suites/"):
                assert (ROOT / arg).is_file(), f"{e}: {arg} does not exist"


def test_a_runnable_block_is_read_as_written(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```sh\nrlbench not-runnable\n```\n\n<!-- runnable -->\n```console\n$ rlbench status  # all\n\n"
        'rlbench sql \\\n  "SELECT 1"\n# a comment\n```\n'
    )
    examples = docgen.runnable_examples(page, tmp_path)
    assert [(e.line, e.argv) for e in examples] == [
        (9, ["rlbench", "status"]),
        (11, ["rlbench", "sql", "SELECT 1"]),
    ]
    assert str(examples[0]) == "page.md:9: rlbench status  # all"
    page.write_text("<!-- runnable -->\n```sh\npython -c 1\n```\n")
    with pytest.raises(ValueError, match=r"page.md:3: a runnable block holds only rlbench commands"):
        docgen.runnable_examples(page, tmp_path)
    page.write_text("<!-- runnable -->\ntext\n")
    with pytest.raises(ValueError, match=r"page.md:1: .* must be followed by a fenced code block"):
        docgen.runnable_examples(page, tmp_path)
