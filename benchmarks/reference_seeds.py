"""What the reference results still need: per bundle in results/reference/, its published claims (how many are
legacy: a mean of 3 seeds where the rule asks for an IQM with its 95% interval over at least 5) and the seeds of
every algorithm x task, cells under the minimum flagged, to plan the re-runs.

    python benchmarks/reference_seeds.py                     # results/reference/claims.yaml
    python benchmarks/reference_seeds.py path/to/claims.yaml

tests/unit/test_reference_claims.py checks every claim against its bundle.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rlbench_cli.claims import report
from rlbench_cli.errors import RlbenchError


def main(argv: list[str]) -> int:
    path = (
        Path(argv[0])
        if argv
        else Path(__file__).resolve().parents[1] / "results" / "reference" / "claims.yaml"
    )
    try:
        print(report(path), end="")
    except RlbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
