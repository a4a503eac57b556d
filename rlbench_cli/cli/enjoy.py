"""``rlbench enjoy``: play a run's saved policy for a few seeded episodes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import DbOpt, handle_errors, store_for


@handle_errors
def enjoy(
    run_id: Annotated[
        str, typer.Argument(help="the run's id (column run_id of rlbench fetch)", show_default=False)
    ],
    which: Annotated[
        str, typer.Option("--which", help="best (by the suite's score metric) or final")
    ] = "best",
    episodes: Annotated[
        int, typer.Option("--episodes", "-n", help="episodes to play (the run's eval seeds)")
    ] = 1,
    video: Annotated[
        Path | None,
        typer.Option("--video", help="write the episodes to this MP4 (a transcript for text envs)"),
    ] = None,
    db: DbOpt = None,
) -> None:
    """Rebuild a run's saved best or final policy (saved by runs of ppo, ppo_jax, pqn_jax, the d3rlpy
    algorithms, hf_decision_transformer and the text algorithms) and play it for N seeded episodes, printing
    each return; --video writes them as one MP4.

    Example: rlbench enjoy 46c6566e0c673a93 --which final --episodes 5 --video cartpole.mp4
    """
    from ..enjoy import enjoy as play

    p = play(store_for(db), run_id, which, episodes, video)
    for seed, ret in zip(p.seeds, p.returns):
        typer.echo(f"episode seed={seed}  return {ret:g}")
    mean = sum(p.returns) / len(p.returns)
    typer.echo(f"{p.run_id} {p.which} policy (step {p.step}): mean return {mean:g} over {len(p.returns)} episode(s)"
               + (f"; video in {p.video}" if p.video else "")
               + (f" (played in gymnasium's {p.simulator}: gymnax draws no frames)" if p.simulator else ""))  # fmt: skip
