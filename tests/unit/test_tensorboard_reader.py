"""The TensorBoard event reader against files written by the real SummaryWriter."""

import pytest

from rlbench_cli.tbevents import EventTail, find_event_files, read_scalars

SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter


def test_reads_simple_and_tensor_scalars_written_by_summarywriter(tmp_path):
    w = SummaryWriter(log_dir=str(tmp_path / "runs" / "exp"))
    for step in range(0, 50, 10):
        w.add_scalar("charts/episodic_return", step * 1.5, step)
        w.add_scalar("losses/value_loss", 1.0 / (step + 1), step, new_style=True)  # tensor-valued summary
    w.close()
    files = find_event_files(tmp_path)
    assert len(files) == 1
    got = {(tag, step): value for step, tag, value, _ in read_scalars(tmp_path)}
    for step in range(0, 50, 10):
        assert got[("charts/episodic_return", step)] == pytest.approx(step * 1.5)
        assert got[("losses/value_loss", step)] == pytest.approx(1.0 / (step + 1), rel=1e-6)


def test_tail_reads_only_new_complete_records(tmp_path):
    w = SummaryWriter(log_dir=str(tmp_path))
    w.add_scalar("a", 1.0, 1)
    w.flush()
    (f,) = find_event_files(tmp_path)
    tail = EventTail(f)
    first = tail.read()
    assert [(s, t, v) for s, t, v, _ in first] == [(1, "a", 1.0)]
    assert tail.read() == []
    w.add_scalar("a", 2.0, 2)
    w.close()
    assert [(s, t, v) for s, t, v, _ in tail.read()] == [(2, "a", 2.0)]
    # a record cut off mid-write is left for the next read
    data = f.read_bytes()
    half = tmp_path / "half" / "events.out.tfevents.x"
    half.parent.mkdir()
    half.write_bytes(data[:-5])
    t2 = EventTail(half)
    before = t2.read()
    half.write_bytes(data)
    assert len(before) + len(t2.read()) == len(EventTail(f).read() or read_scalars(f))
