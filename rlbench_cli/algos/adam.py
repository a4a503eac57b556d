"""Adam for ppo: the fused kernel torch.optim.Adam(fused=True) runs, without torch.optim's wrapper.

A worker's first ``torch.optim.Optimizer`` imports ``torch._dynamo`` (``add_param_group`` is wrapped by
``torch._disable_dynamo``, whose first call imports it): 1.8-2.4 s of CPU on these machines, paid by the
first torch run of every worker, before its first training step. ppo needs none of what that wrapper is for
(compilation, hooks, schedulers), so it steps its parameters with the same kernel, called the way
``torch.optim.adam._fused_adam`` calls it: the step counts are incremented by ``_foreach_add_`` and then
``torch._fused_adam_`` updates moments and parameters. The values are bitwise those of
``torch.optim.Adam(fused=True)`` (a unit test steps both side by side), and so is ``state_dict``: a
checkpoint written by either loads into the other.

What ppo uses of an optimiser is here: ``param_groups`` (one group; its ``lr`` a float or, for a CUDA graph,
a 0-d device tensor), ``state`` (per parameter: ``step``, ``exp_avg``, ``exp_avg_sq``, created at the first
step that has a gradient for it), ``defaults``, ``zero_grad``, ``step``, ``state_dict``, ``load_state_dict``.
``capturable`` is kept as a group option for the state dict (the fused kernel keeps every value on the
device either way, so a step can be captured in a CUDA graph).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from copy import deepcopy
from typing import Any, Literal

import torch

__all__ = ["FusedAdam", "fused_supported"]


def fused_supported(device: torch.device) -> bool:
    """Devices with torch's fused Adam kernel (``torch._fused_adam_``) for float32 parameters."""
    return device.type in ("cpu", "cuda")


class FusedAdam:
    """Adam with torch's fused kernel; the subset of ``torch.optim.Adam``'s interface that ppo uses.

    Args:
        params: the parameters to optimise (float tensors on one device with a fused kernel).
        lr: learning rate, a float or a 0-d tensor (on the parameters' device, read by a captured graph).
        betas, eps: Adam's coefficients.
        capturable: recorded in the group and the state dict, as torch.optim.Adam records it.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float | torch.Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 capturable: bool = False) -> None:  # fmt: skip
        params = list(params)
        if not params:
            raise ValueError("FusedAdam got an empty parameter list")
        for p in params:
            if not (p.is_floating_point() and fused_supported(p.device)):
                raise RuntimeError(f"FusedAdam needs floating-point parameters on CPU or CUDA, got {p.dtype} "
                                   f"on {p.device}")  # fmt: skip
        self.defaults: dict[str, Any] = {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": 0, "amsgrad": False, "maximize": False,
            "foreach": None, "capturable": capturable, "differentiable": False, "fused": True,
            "decoupled_weight_decay": False,
        }  # fmt: skip
        self.param_groups: list[dict[str, Any]] = [{**self.defaults, "params": params}]
        self.state: defaultdict[torch.Tensor, dict[str, torch.Tensor]] = defaultdict(dict)

    def zero_grad(self, set_to_none: Literal[True] = True) -> None:
        """Gradients set to None (torch.optim's default and ppo's only use)."""
        for p in self.param_groups[0]["params"]:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step of every parameter that has a gradient (``torch.optim.adam._fused_adam``'s calls,
        grouped by device and dtype as it groups them)."""
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        lr = group["lr"]
        buckets: dict[tuple[torch.device, torch.dtype], list[list[torch.Tensor]]] = {}
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("FusedAdam does not support sparse gradients")
            state = self.state[p]
            if not state:  # created as torch.optim.Adam creates it for fused=True
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            lists = buckets.setdefault((p.device, p.dtype), [[], [], [], [], []])
            for out, value in zip(lists, (p, p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"]),
                                  strict=True):  # fmt: skip
                out.append(value)
        for (device, _), (ps, grads, exp_avgs, exp_avg_sqs, steps) in buckets.items():
            device_lr = lr
            if isinstance(lr, torch.Tensor) and lr.device.type != "cpu" and lr.device != device:
                device_lr = lr.to(device=device, non_blocking=True)
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(ps, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, lr=device_lr,
                               beta1=beta1, beta2=beta2, weight_decay=0, eps=group["eps"], maximize=False,
                               grad_scale=None, found_inf=None)  # fmt: skip

    # -- checkpoints: torch.optim.Optimizer's format ---------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Optimizer.state_dict``'s layout: state keyed by the parameter's index, the group's
        options with ``params`` as indices. Tensors are the optimiser's own, not copies (as torch's)."""
        group = self.param_groups[0]
        index = {id(p): i for i, p in enumerate(group["params"])}
        packed = {k: v for k, v in group.items() if k != "params"}
        packed["params"] = list(range(len(group["params"])))
        state = {index[id(p)]: dict(v) for p, v in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": [packed]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict of this class or of ``torch.optim.Adam`` over the same parameters (group options
        included, as torch loads them): step counts as float32 on the parameter's device (where fused Adam
        keeps them), moments in the parameter's dtype and device."""
        saved = deepcopy(state_dict["param_groups"])
        params = self.param_groups[0]["params"]
        if len(saved) != 1 or len(saved[0]["params"]) != len(params):
            raise ValueError("loaded state dict does not match this optimiser's parameter group")
        by_id = dict(zip(saved[0]["params"], params, strict=True))
        self.state = defaultdict(dict)
        for key, values in state_dict["state"].items():
            p = by_id[key]
            self.state[p] = {
                k: v.to(dtype=torch.float32 if k == "step" else p.dtype, device=p.device)
                for k, v in values.items()
            }
        group = {k: v for k, v in saved[0].items() if k != "params"}
        self.param_groups = [{**group, "params": params}]
