"""``OfflineData`` as a d3rlpy dataset.

Files written by ``write_hdf5`` load in d3rlpy directly (``ReplayBuffer.load``, see ``hdf5``); this is for
data in memory, a user's D4RL file without d3rlpy's layout, or a Minari dataset. The recipe by hand::

    import h5py, d3rlpy
    f = h5py.File("my-d4rl.hdf5", "r")
    dataset = d3rlpy.dataset.MDPDataset(f["observations"][()], f["actions"][()], f["rewards"][()],
                                        f["terminals"][()], f["timeouts"][()])

``to_d3rlpy`` does the same and also tells d3rlpy the action space and the true number of discrete actions
(d3rlpy would infer it from the largest action present in the data).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import numpy as np

from .data import OfflineData

__all__ = ["to_d3rlpy"]


def to_d3rlpy(data: OfflineData) -> Any:
    """A ``d3rlpy.dataset.MDPDataset`` holding ``data``'s episodes (same split as ``episode_ends``)."""
    with contextlib.redirect_stderr(io.StringIO()):  # d3rlpy's import prints a legacy-gym notice
        from d3rlpy.constants import ActionSpace
        from d3rlpy.dataset import MDPDataset

    terminals = np.asarray(data.terminals, bool)
    timeouts = np.asarray(data.timeouts, bool) & ~terminals
    if len(terminals) and not terminals[-1]:
        timeouts[-1] = True  # the last transition ends an episode, as in OfflineData.episode_ends
    if data.discrete:
        actions = np.asarray(data.actions, np.int64).reshape(-1, 1)
        size = int(data.meta.get("n_actions") or int(actions.max()) + 1)
        space = ActionSpace.DISCRETE
    else:
        actions = np.asarray(data.actions, np.float32).reshape(len(data), -1)
        size, space = actions.shape[1], ActionSpace.CONTINUOUS
    return MDPDataset(
        observations=np.asarray(data.observations, np.float32),
        actions=actions,
        rewards=np.asarray(data.rewards, np.float32).reshape(-1, 1),
        terminals=terminals.astype(np.float32),
        timeouts=timeouts.astype(np.float32),
        action_space=space,
        action_size=size,
    )
