"""Run identity: the canonical JSON of a run's config and the run id hashed from it.

A leaf module (standard library only), so that anything that names runs (the grid, the algorithm registry's
params check, importers, packs) can import it without importing the suite's schema.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "run_id_of"]


def canonical_json(obj: Any) -> str:
    """``obj`` as JSON with sorted keys and no spaces: equal configs give equal text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def run_id_of(identity: dict[str, Any]) -> str:
    """The run id of a run's identity: the first 16 hex digits of the SHA-256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(identity).encode()).hexdigest()[:16]
