"""Seeded simulation of the Raft core under loss, delay, reordering, partitions, crashes and snapshots, with
observers in some seeds.

Each test runs a chunk of seeds; a failure names its seed. Replay one with
`.venv/bin/python -m pytest tests/raft/test_simulation.py --seed N` (runs seed N with 3 and 5 voters).
"""

import pytest

from tests.raft.simulation import Simulation

CHUNK = 250
CHUNKS = {3: 12, 5: 8}  # 3,000 seeds with 3 voters and 2,000 with 5
STEPS = 300  # 3 s of simulated time with faults, then healing until the logs converge


def run_seed(seed: int, voters: int, observers: int | None = None) -> Simulation:
    """Run one seed; `observers` None lets the seed draw how many (0 to 2)."""
    simulation = Simulation(seed, voters, observers)
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


def test_simulation_elections_start_with_pre_votes_and_some_go_no_further():
    """Guard against a vacuous pre-vote: seeds run with and without it, and with it many pre-votes end without
    bumping the epoch."""
    simulations = [run_seed(seed, 5) for seed in range(30)]
    assert {s.config.pre_vote for s in simulations} == {True, False}
    with_pre_vote = [s for s in simulations if s.config.pre_vote]
    assert sum(s.votes_sent for s in with_pre_vote) > 0
    assert sum(s.pre_votes_sent for s in with_pre_vote) > 2 * sum(s.votes_sent for s in with_pre_vote)
    assert not any(s.pre_votes_sent for s in simulations if not s.config.pre_vote)


def test_simulation_observers_follow_leaders_through_faults():
    """Guard against vacuous observers: seeds draw them, and they follow several leaders through crashes and
    partitions, ending with the voters' log (checked by every run)."""
    drawn = [Simulation(seed, 3).observer_ids for seed in range(3_000_000, 3_000_100)]
    assert {len(ids) for ids in drawn} == {0, 1, 2}
    simulations = [run_seed(seed, 3, observers=2) for seed in range(20)]
    assert all(sorted(s.nodes) == [1, 2, 3, 4, 5] for s in simulations)
    assert sum(s.observer_leader_changes for s in simulations) > 20 * 2  # some followed a second leader
    restarted = [s for s in simulations if any(s.nodes[i].incarnation > 1 for i in s.observer_ids)]
    assert len(restarted) >= 5


def test_same_seed_replays_identically():
    first, second = run_seed(7, 5), run_seed(7, 5)
    assert first.committed == second.committed
    assert first.leaders_by_epoch == second.leaders_by_epoch
