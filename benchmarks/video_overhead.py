"""What episode videos cost: ppo on CartPole-v1 through the runner (``runner.run_one``, as a worker runs it),
without videos and with ``budget.video_every: 5`` (a video of one evaluation episode at every 5th evaluation),
side by side. Target: at most 5% more wall time.

Both sides are the same run (same seed, CleanRL's ppo.py defaults, --steps env steps, an evaluation every
--steps / 10 steps of 10 episodes), and both keep their best and final policy as every run does; only
``video_every`` differs, which is not part of a run's identity. The sides alternate run by run and each figure
is the median of --repeats runs, wall time of ``run_one`` from start to result.json (the videos' drawing
included: the run waits for them before it ends), and the CPU seconds of the run's process and of the
children that drew the videos (on a loaded machine the wall times move with the load; CPU much less).

    python benchmarks/video_overhead.py                 # 50,000 steps, median of 3
    python benchmarks/video_overhead.py --steps 8192 --repeats 1

One torch thread (--threads), as a worker of ``rlbench run`` has by default on a small machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET = 1.05


def spec(steps: int, video_every: int | None, seed: int) -> Any:
    from rlbench_cli.suite.grid import RunSpec

    budget = {"steps": steps, "eval_every": max(1, steps // 10), "eval_episodes": 10, "timeout": None,
              "checkpoint_every": None, "video_every": video_every}  # fmt: skip
    return RunSpec(suite="bench", algo="ppo", algo_name="ppo", params={}, env_id="CartPole-v1", env_kwargs={},
                   seed=seed, budget=budget)  # fmt: skip


def _cpu() -> tuple[float, float]:
    """CPU seconds so far of this process and of its children that have ended (the videos' drawing, ffmpeg)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def one(steps: int, video_every: int | None, seed: int, root: Path) -> tuple[float, float, float, int]:
    """Wall seconds of one run, CPU seconds of the run's process and of its children, and how many videos
    it listed."""
    from rlbench_cli.artifacts import current, read_index
    from rlbench_cli.runner import attempt_dir, run_one

    s = spec(steps, video_every, seed)
    folder = attempt_dir(root / f"v{video_every}-{time.monotonic_ns()}", s)
    c0, t0 = _cpu(), time.perf_counter()
    result = run_one(s, folder)
    wall, c1 = time.perf_counter() - t0, _cpu()
    assert result["status"] == "finished", result
    videos = sum(r["kind"] == "video" for r in current(read_index(folder)))
    return wall, c1[0] - c0[0], c1[1] - c0[1], videos


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--every", type=int, default=5, help="video_every of the side with videos")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="rlbench-video-bench-") as tmp:
        one(
            2048, args.every, 0, Path(tmp)
        )  # untimed: first-use costs (imports, pygame, ffmpeg) on both sides
        runs: dict[str, list[tuple[float, float, float, int]]] = {"none": [], "video": []}
        for _ in range(args.repeats):
            runs["none"].append(one(args.steps, None, 1, Path(tmp)))
            runs["video"].append(one(args.steps, args.every, 1, Path(tmp)))
    med = {side: [statistics.median(r[i] for r in rs) for i in range(4)] for side, rs in runs.items()}
    ratio = med["video"][0] / med["none"][0]
    cpu_ratio = (med["video"][1] + med["video"][2]) / (med["none"][1] + med["none"][2])
    print(f"ppo CartPole-v1, {args.steps:,} steps, an evaluation every {max(1, args.steps // 10):,} steps; "
          f"median of {args.repeats}")  # fmt: skip
    print(f"{'side':<22}{'wall s':>9}{'run CPU s':>11}{'video CPU s':>13}{'videos':>8}")
    for side, label in (("none", "no videos"), ("video", f"video_every: {args.every}")):
        wall, cpu, kids, n = med[side]
        print(f"{label:<22}{wall:>9.2f}{cpu:>11.2f}{kids:>13.2f}{n:>8.0f}")
    verdict = "within" if ratio <= TARGET else "OVER"
    print(f"ratio with videos / without: wall {ratio:.3f}x ({verdict} the target {TARGET:.2f}x), "
          f"CPU {cpu_ratio:.3f}x")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"steps": args.steps, "repeats": args.repeats, "every": args.every,
                                         "runs": runs, "ratio": ratio, "cpu_ratio": cpu_ratio}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
