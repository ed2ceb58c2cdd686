"""Seeded simulation of the Raft core under loss, delay, reordering, partitions, crashes and snapshots.

Each test runs a chunk of seeds; a failure names its seed. Replay one with
`.venv/bin/python -m pytest tests/raft/test_simulation.py --seed N` (runs seed N with 3 and 5 voters).
"""

import pytest

from tests.raft.simulation import Simulation

CHUNK = 250
CHUNKS = {3: 12, 5: 8}  # 3,000 seeds with 3 voters and 2,000 with 5
STEPS = 300  # 3 s of simulated time with faults, then healing until the logs converge


def run_seed(seed: int, voters: int) -> Simulation:
    simulation = Simulation(seed, voters)
    try:
        simulation.run(STEPS)
    except AssertionError as error:
        raise AssertionError(f"voters={voters} seed={seed} (replay with --seed {seed}): {error}") from error
    return simulation


@pytest.mark.parametrize("voters,chunk", [(v, c) for v, n in CHUNKS.items() for c in range(n)])
def test_invariants_hold_and_logs_converge_for_many_seeds(request, voters, chunk):
    if request.config.getoption("--seed") is not None:
        pytest.skip("replaying one seed")
    base = voters * 1_000_000 + chunk * CHUNK
    for seed in range(base, base + CHUNK):
        run_seed(seed, voters)


@pytest.mark.parametrize("voters", [3, 5])
def test_replay_seed(request, voters):
    seed = request.config.getoption("--seed")
    if seed is None:
        pytest.skip("give --seed N to replay one seed")
    run_seed(seed, voters)


def test_simulation_commits_proposals_and_elects_again_after_faults():
    """Guard against a vacuous simulator: faults do force new epochs and proposals do commit."""
    simulations = [run_seed(seed, 3) for seed in range(20)]
    assert sum(len(s.acknowledged) for s in simulations) > 500
    assert max(len(s.leaders_by_epoch) for s in simulations) > 2


def test_simulation_snapshots_and_lagging_followers_install_snapshots():
    """Guard against vacuous snapshots: nodes take them, and followers that fell behind fetch them."""
    simulations = [run_seed(seed, 3) for seed in range(20)]
    assert sum(s.snapshots_taken for s in simulations) > 100
    assert sum(s.snapshots_installed for s in simulations) >= 5
    assert sum(1 for s in simulations if s.snapshots_installed) >= 3


def test_same_seed_replays_identically():
    first, second = run_seed(7, 5), run_seed(7, 5)
    assert first.committed == second.committed
    assert first.leaders_by_epoch == second.leaders_by_epoch
