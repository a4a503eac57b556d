"""``rlbench datasets``: build D4RL-style offline datasets locally, list them, show one, export to Minari.

The commands are thin: ``datagen`` trains and collects, ``datasets.catalog`` finds and summarises,
``datasets.minari_io`` exports. Heavy packages (torch, d3rlpy, minari, h5py) are imported inside commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import JsonOpt, handle_errors

datasets_app = typer.Typer(
    name="datasets",
    help="Offline datasets: build D4RL-style ones locally (random, medium, expert, medium-replay, "
    "medium-expert; NeoRL-2-style conservative), list, show, export to Minari. Nothing is downloaded.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help, as the app's (cli/app.py)
)

DatasetsOpt = Annotated[
    Path | None,
    typer.Option(
        "--datasets",
        help="datasets folder [default: $RLBENCH_DATASETS or results/datasets]",
        show_default=False,
    ),
]


@datasets_app.command()
@handle_errors
def build(
    env: Annotated[
        str, typer.Argument(help="gymnasium id, e.g. CartPole-v1, Pendulum-v1, Hopper-v5, rlbench/MazeFO-v0")
    ],
    level: Annotated[
        list[str],
        typer.Option(
            "--level",
            help="random | medium | expert | medium-replay | medium-expert | conservative (repeatable); "
            "text envs (rlbench/...): optimal | noisy | mixed | random",
        ),
    ],
    size: Annotated[
        int | None,
        typer.Option(
            "--size",
            help="transitions per dataset (text envs: episodes) [default: the env's; medium-replay: the training "
            "steps up to the medium policy]",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="seed of the behaviour training and collection")
    ] = 0,
    behaviour_steps: Annotated[
        int | None,
        typer.Option(
            "--behaviour-steps",
            help="behaviour training budget in env steps [default: the env's]",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="rebuild existing files (and retrain the behaviour policy when "
            "--behaviour-steps differs from the cached one)",
        ),
    ] = False,
    device: Annotated[
        str, typer.Option("--device", help="torch device of the behaviour policy (training, collection)")
    ] = "cpu",
    datasets: DatasetsOpt = None,
    env_kwargs: Annotated[
        str | None,
        typer.Option(
            "--env-kwargs", help='env kwargs as JSON, e.g. \'{"stockfish": "/usr/games/stockfish"}\''
        ),
    ] = None,
) -> None:
    """Build D4RL-style datasets of ENV: train a behaviour policy once (cached), then collect each level.

    Writes <datasets>/<ENV>-<level>.hdf5: D4RL's layout, loadable by d3rlpy as is, with the random and
    expert reference returns and the provenance in its metadata. Suites name them as <ENV>-<level>.

    A text env (rlbench/<Task>-v0) gets episodes of its scripted policies instead, --size of them, as JSONL:
    <datasets>/<Task>-v0-<level>.jsonl, named <Task>-v0-<level> in suites.

    Example: rlbench datasets build CartPole-v1 --level medium --level expert
    Example: rlbench datasets build rlbench/MazeFO-v0 --level mixed --size 500
    """
    from ..datagen import build

    build(
        env,
        level,
        size=size,
        seed=seed,
        root=datasets,
        env_kwargs=_json_kwargs(env_kwargs),
        force=force,
        behaviour_steps=behaviour_steps,
        device=device,
        progress=typer.echo,
    )


def _json_kwargs(text: str | None) -> dict[str, Any]:
    from ..errors import UsageError

    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--env-kwargs: not JSON ({e.msg}); write e.g. '{{\"movetime\": 0.05}}'") from None
    if not isinstance(value, dict):
        raise UsageError("--env-kwargs: give a JSON object of keyword arguments, e.g. '{\"movetime\": 0.05}'")
    return value


def _fmt(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


@datasets_app.command("list")
@handle_errors
def list_(datasets: DatasetsOpt = None, json_out: JsonOpt = False) -> None:
    """List the datasets in the datasets folder: transitions, episodes, mean and normalised return, size.

    Example: rlbench datasets list --json
    """
    from ..datasets.catalog import list_datasets
    from ..datasets.names import datasets_root

    rows = list_datasets(datasets)
    if json_out:
        typer.echo(json.dumps(rows, indent=1, default=str))
        return
    if not rows:
        typer.echo(
            f"{datasets or datasets_root()}: no datasets yet (rlbench datasets build ENV --level LEVEL)"
        )
        return
    typer.echo(
        f"{'name':<28} {'env':<16} {'level':<13} {'transitions':>11} {'episodes':>8} {'mean return':>11} "
        f"{'normalised':>10} {'size':>9}"
    )
    for r in rows:
        typer.echo(
            f"{r['name']:<28} {r['env'] or '-':<16} {r['level'] or '-':<13} {r['transitions']:>11} "
            f"{r['episodes']:>8} {_fmt(r['mean_return']):>11} {_fmt(r['normalized_mean_return']):>10} "
            f"{r['bytes'] / 2**20:>7.1f}MB"
        )


@datasets_app.command()
@handle_errors
def show(
    name: Annotated[
        str,
        typer.Argument(
            help="dataset name (<ENV>-<level>: its .hdf5, or a text env's .jsonl), a file or Minari folder, or minari:<id>"
        ),
    ],
    datasets: DatasetsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show a dataset: where it is, its summary, its arrays and all its metadata and provenance.

    Example: rlbench datasets show CartPole-v1-medium
    """
    from ..datasets.catalog import describe

    info = describe(name, datasets)
    if json_out:
        typer.echo(json.dumps(info, indent=1, default=str))
        return
    s = info["summary"]
    typer.echo(f"{s['name']}: {info['path']}")
    typer.echo(
        f"  {s['transitions']} transitions, {s['episodes']} episodes, mean return {_fmt(s['mean_return'])}, "
        f"normalised {_fmt(s['normalized_mean_return'])}, {s['bytes'] / 2**20:.1f} MB"
    )
    for k, a in info["arrays"].items():
        typer.echo(f"  {k}: {tuple(a['shape'])} {a['dtype']}")
    typer.echo("metadata:")
    for k, v in sorted(info["metadata"].items()):
        text = json.dumps(v, default=str) if isinstance(v, (dict, list)) else str(v)
        typer.echo(f"  {k}: {text}")


@datasets_app.command()
@handle_errors
def export(
    name: Annotated[str, typer.Argument(help="dataset name, .hdf5 file or Minari folder")],
    fmt: Annotated[str, typer.Option("--format", help="output format: minari")] = "minari",
    dataset_id: Annotated[
        str | None,
        typer.Option("--id", help="Minari dataset id [default: rlbench/<name>-v0]", show_default=False),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Minari datasets root [default: $MINARI_DATASETS_PATH or ~/.minari/datasets]",
            show_default=False,
        ),
    ] = None,
    datasets: DatasetsOpt = None,
) -> None:
    """Export a dataset as a Minari dataset that minari.load_dataset opens (references and provenance kept).

    Example: rlbench datasets export CartPole-v1-medium --format minari --id rlbench/cartpole-medium-v0
    """
    from ..datasets.catalog import export_minari
    from ..errors import UsageError

    if fmt != "minari":
        raise UsageError(
            f"--format {fmt!r}: the one export format is minari (the .hdf5 file itself is "
            "D4RL's format and loads in d3rlpy)"
        )
    dataset_id, folder, root = export_minari(name, dataset_id, out, datasets)
    typer.echo(
        f"wrote Minari dataset {dataset_id} to {folder}; open it with minari.load_dataset({dataset_id!r})"
        + ("" if out is None else f" and MINARI_DATASETS_PATH={root}")
    )


@datasets_app.command("import")
@handle_errors
def import_(
    file: Annotated[
        Path, typer.Argument(help="ImagineBench's real data: .hdf5, or a NumPy pickle (.pkl, .npy)")
    ],
    name: Annotated[str, typer.Option("--name", help="the dataset's name in suites")],
    env: Annotated[
        str, typer.Option("--env", help="gymnasium id runs are evaluated in, e.g. rlbench/BabyAI-Lang-v0")
    ],
    imagined: Annotated[
        Path | None, typer.Option("--imagined", help="ImagineBench's imagined rollouts (same formats)")
    ] = None,
    trust: Annotated[
        bool, typer.Option("--trust", help="read pickled files: loading a pickle can run code hidden in it")
    ] = False,
    encoder: Annotated[
        str | None,
        typer.Option("--encoder", help="embeds instructions given as words [default: rlbench's own]"),
    ] = None,
    datasets: DatasetsOpt = None,
) -> None:
    """Import ImagineBench's files (observations, actions, rewards, masks, instructions) as a dataset whose
    runs pick real and imagined rollouts with data_mix. Everything is read and checked before anything is
    written.

    Example: rlbench datasets import real.hdf5 --imagined imagined.pkl --trust --name babyai-ib --env rlbench/BabyAI-Lang-v0
    """
    from ..datasets.imaginebench import import_files
    from ..errors import UsageError
    from ..suite.models import NAME_RE

    if not NAME_RE.match(name):
        raise UsageError(
            f"--name {name!r}: use letters, digits, '_', '.', '-', starting with a letter or digit"
        )
    out, n_real, n_imagined = import_files(file, name, env, imagined, trust, encoder, datasets)
    typer.echo(f"imported {n_real} real" + (f" and {n_imagined} imagined" if imagined else "")
               + f" transitions as dataset {name!r} ({out}); use it in a suite as {{name: {name}, env: {env}, "
               "data_mix: [real, imagined, real+imagined]}")  # fmt: skip
