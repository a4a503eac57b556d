"""When a run's attempt is run again: a lost node is retried apart from --retries, and only so often; and how
the Ray executor tells a lost node from a dead worker process (the e2e proof on a real multi-node cluster is
tests/e2e/test_ray_node_loss.py)."""

from rlbench_cli.coordinator import retry_why
from rlbench_cli.executors.base import NODE_LOSS_RETRIES, Outcome
from rlbench_cli.executors.ray import failures

LOST = Outcome("failed", None, "node lost: Ray node ab at 10.0.0.2 died", 1.0, {"node_lost": "ab"})
FAILED = Outcome("failed", 1, "ValueError: boom", 1.0)


def test_a_lost_node_is_retried_without_using_the_retries():
    assert retry_why(LOST, attempts=1, lost=0, retries=0) == "node lost"
    # after two node losses the run's own failure still gets its one --retries
    assert retry_why(FAILED, attempts=3, lost=2, retries=1) == "retry"
    assert retry_why(FAILED, attempts=4, lost=2, retries=1) is None
    assert retry_why(FAILED, attempts=1, lost=0, retries=0) is None
    assert retry_why(Outcome("finished", 0, None, 1.0), attempts=1, lost=0, retries=3) is None
    assert retry_why(Outcome("interrupted", None, "interrupted", 1.0, {"node_lost": "ab"}), 1, 0, 3) is None


def test_node_losses_are_capped_then_count_as_failures():
    lost, attempts = 0, 0
    while (why := retry_why(LOST, attempts + 1, lost, retries=0)) == "node lost":
        attempts, lost = attempts + 1, lost + 1
    assert lost == NODE_LOSS_RETRIES and why is None  # a flapping cluster cannot loop forever
    assert retry_why(LOST, NODE_LOSS_RETRIES + 1, NODE_LOSS_RETRIES, retries=1) == "retry"


class _ActorDiedError(Exception):
    pass


def test_a_node_death_is_told_from_a_worker_death():
    node = _ActorDiedError("The actor died unexpectedly before finishing this task.\n\tip: 10.0.0.2\nThe actor "
                           "died because its node has died. Node Id: f76b9d3cd2d7\n\tthe actor's node was "
                           "terminated expectedly: received SIGTERM")  # fmt: skip
    worker = _ActorDiedError("The actor died unexpectedly before finishing this task. Worker exit type: "
                             "SYSTEM_ERROR Worker exit detail: The leased worker process has died.")  # fmt: skip
    assert failures.says_node_died(node) and not failures.says_node_died(worker)
    cause = failures.lost_cause(node, {"node_id": "f76b9d3cd2d757091d2c", "ip": "10.0.0.2", "host": "n2"})
    assert cause == ("node lost: Ray node f76b9d3cd2d7 at 10.0.0.2 died or left the cluster; "
                     "Ray: _ActorDiedError")  # fmt: skip
    assert failures.lost_cause(worker, None).startswith("node lost: Ray node ? at ? died")
