"""ppo's FusedAdam against torch.optim.Adam(fused=True): the same values bit for bit, the same state dict, and
no import of torch._dynamo."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from rlbench_cli.algos.adam import FusedAdam


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))


def _step(net: nn.Module, opt, x: torch.Tensor, skip_last: bool = False) -> None:
    opt.zero_grad(set_to_none=True)
    net(x).pow(2).mean().backward()
    if skip_last:  # a parameter without a gradient this step is left alone, its state too
        net[4].bias.grad = None
    nn.utils.clip_grad_norm_(net.parameters(), 0.5)
    opt.step()


def _same(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def _state_equal(ours: FusedAdam, theirs: torch.optim.Optimizer) -> bool:
    a, b = ours.state_dict(), theirs.state_dict()
    if a["param_groups"] != b["param_groups"] or a["state"].keys() != b["state"].keys():
        return False
    return all(
        a["state"][i].keys() == b["state"][i].keys()
        and all(torch.equal(a["state"][i][k], b["state"][i][k]) for k in a["state"][i])
        for i in a["state"]
    )


@pytest.mark.parametrize("tensor_lr", [False, True])
def test_steps_are_bitwise_torch_fused_adams(tensor_lr):
    ours_net, torch_net = _net(0), _net(0)
    lr = (lambda: torch.tensor(2.5e-4)) if tensor_lr else (lambda: 2.5e-4)
    ours = FusedAdam(ours_net.parameters(), lr=lr(), eps=1e-5)
    theirs = torch.optim.Adam(torch_net.parameters(), lr=lr(), eps=1e-5, fused=True)
    gen = torch.Generator().manual_seed(1)
    for i in range(40):
        x = torch.randn(32, 4, generator=gen)
        _step(ours_net, ours, x, skip_last=i < 3)
        _step(torch_net, theirs, x, skip_last=i < 3)
        assert _same(ours_net, torch_net), f"parameters differ after step {i}"
    assert _state_equal(ours, theirs)
    assert float(ours.state[ours_net[4].bias]["step"]) == 37.0  # not stepped while it had no gradient
    assert not _same(ours_net, _net(0))


def test_learning_rate_changes_as_ppo_anneals_it():
    ours_net, torch_net = _net(2), _net(2)
    ours = FusedAdam(ours_net.parameters(), lr=1e-3, eps=1e-5)
    theirs = torch.optim.Adam(torch_net.parameters(), lr=1e-3, eps=1e-5, fused=True)
    for i in range(10):
        for opt in (ours, theirs):
            opt.param_groups[0]["lr"] = 1e-3 * (1 - i / 10)
        x = torch.full((8, 4), float(i))
        _step(ours_net, ours, x)
        _step(torch_net, theirs, x)
    assert _same(ours_net, torch_net)


@pytest.mark.parametrize("writer", ["ours", "torch"])
def test_a_checkpoint_of_either_resumes_in_the_other_bitwise(writer, tmp_path):
    first_net = _net(3)
    make = {
        "ours": lambda ps: FusedAdam(ps, lr=3e-4, eps=1e-5),
        "torch": lambda ps: torch.optim.Adam(ps, lr=3e-4, eps=1e-5, fused=True),
    }
    first = make[writer](first_net.parameters())
    gen = torch.Generator().manual_seed(4)
    xs = [torch.randn(16, 4, generator=gen) for _ in range(12)]
    for x in xs[:6]:
        _step(first_net, first, x)
    torch.save({"net": first_net.state_dict(), "opt": first.state_dict()}, tmp_path / "ck.pt")
    for x in xs[6:]:
        _step(first_net, first, x)

    reader = "torch" if writer == "ours" else "ours"
    ck = torch.load(tmp_path / "ck.pt", weights_only=True)
    resumed_net = _net(99)
    resumed_net.load_state_dict(ck["net"])
    resumed = make[reader](resumed_net.parameters())
    resumed.load_state_dict(ck["opt"])
    for x in xs[6:]:
        _step(resumed_net, resumed, x)
    assert _same(first_net, resumed_net)
    assert resumed.state_dict()["param_groups"][0]["params"] == list(range(6))


def test_load_state_dict_takes_the_saved_group_options_and_refuses_another_shape():
    net = _net(5)
    opt = FusedAdam(net.parameters(), lr=1e-3, eps=1e-5)
    _step(net, opt, torch.ones(2, 4))
    saved = opt.state_dict()
    saved["param_groups"][0]["lr"] = 7e-4
    again = FusedAdam(net.parameters(), lr=1e-3, eps=1e-5)
    again.load_state_dict(saved)
    assert again.param_groups[0]["lr"] == 7e-4 and opt.param_groups[0]["lr"] == 1e-3
    assert again.state[net[0].weight]["step"].dtype == torch.float32
    smaller = FusedAdam(list(net.parameters())[:2], lr=1e-3)
    with pytest.raises(ValueError, match="parameter group"):
        smaller.load_state_dict(saved)


def test_refuses_what_the_fused_kernel_cannot_step():
    with pytest.raises(ValueError, match="empty"):
        FusedAdam([])
    with pytest.raises(RuntimeError, match="floating-point"):
        FusedAdam([nn.Parameter(torch.zeros(2, dtype=torch.int64), requires_grad=False)])


def test_a_ppo_run_never_imports_torch_dynamo(tmp_path):
    """What FusedAdam is for: a worker's first ppo run pays no import of torch._dynamo (seconds)."""
    code = f"""
import sys
from pathlib import Path
import torch
from rlbench_cli.suite.grid import expand
from rlbench_cli.runner import run_one
from rlbench_cli.suite.loader import parse_suite
suite = parse_suite({{"name": "d", "seeds": 1, "budget": {{"steps": 512, "eval_every": 512, "eval_episodes": 1}},
                     "envs": ["CartPole-v1"], "algorithms": [{{"name": "ppo", "params": {{"num_envs": 2,
                     "num_steps": 64}}}}]}}, "d.yaml")
result = run_one(expand(suite)[0], Path({str(tmp_path / "run")!r}), device="cpu")
print(result["status"], "torch._dynamo" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["finished", "False"], out.stdout + out.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_captured_step_replays_as_torch_fused_capturable_adam_steps():
    dev = torch.device("cuda")
    ours_net, torch_net = _net(6).to(dev), _net(6).to(dev)
    ours = FusedAdam(ours_net.parameters(), lr=torch.tensor(1e-3, device=dev), eps=1e-5, capturable=True)
    theirs = torch.optim.Adam(torch_net.parameters(), lr=torch.tensor(1e-3, device=dev), eps=1e-5,
                              fused=True, capturable=True)  # fmt: skip
    x = torch.randn(32, 4, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        _step(ours_net, ours, x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _step(ours_net, ours, x)
    _step(torch_net, theirs, x)
    for _ in range(5):
        graph.replay()
        _step(torch_net, theirs, x)
    torch.cuda.synchronize()
    assert _same(ours_net, torch_net)


def test_cold_start_benchmark_runs_both_sides_and_prints_the_ratio():
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "cold_start.py"), "--repeat", "1",
                          "--steps", "512"], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert any(
        line.split()[0] == "rlbench" and "does not import torch._dynamo" in line for line in lines[1:3]
    )
    assert any(
        line.split()[0] == "torch.optim" and line.endswith(" imports torch._dynamo") for line in lines[1:3]
    )
    assert re.search(r"^rlbench's first run \d+\.\d\dx faster", lines[-1]), out.stdout
