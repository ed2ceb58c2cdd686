"""The partition balancer's optimizer on generated clusters: how long `propose` takes, and what it proposes.

    .venv/bin/python benchmarks/balancer.py [--nodes 10 50 100] [--partitions 5000 20000 50000]
        [--shapes skewed add-nodes] [--replication-factor 3] [--runs 1] [--seed 1]

For each size and shape, a seeded cluster from odradek.balancer.synthetic (sizes around 1 GiB, rates
following size, replication factor --replication-factor):

- skewed: replicas placed at random, but a third of the topics entirely on the same three nodes (all led by
  the first), so those nodes are far above their disk limit; a rebalance with every goal;
- add-nodes: a balanced cluster plus 10% more nodes (at least one), empty; the add-nodes operation (load
  moves only onto the new nodes) with every goal.

Prints a Markdown table: the median seconds of `propose` over --runs (in process, pure Python, one core),
the replica moves (partitions reassigned), the leadership changes, the bytes the moves copy, and the goals
left unsatisfied. Nothing here is asserted by `make test`.
"""

import argparse
import statistics
import time

from odradek.balancer import ProposalOptions, propose
from odradek.balancer.synthetic import synthetic_cluster

GIB = 2**30


def cluster(shape: str, nodes: int, partitions: int, replication_factor: int, seed: int):
    """(model, options) for one shape."""
    if shape == "skewed":
        return (synthetic_cluster(seed, nodes, partitions, replication_factor=replication_factor, placement="skewed"),
                ProposalOptions())
    added = max(1, nodes // 10)
    model = synthetic_cluster(seed, nodes, partitions, replication_factor=replication_factor, placement="balanced",
                              empty_nodes=added)
    return model, ProposalOptions(move_onto=range(nodes + 1, nodes + added + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 50, 100])
    parser.add_argument("--partitions", type=int, nargs="+", default=[5000, 20000, 50000])
    parser.add_argument("--shapes", nargs="+", choices=["skewed", "add-nodes"], default=["skewed", "add-nodes"])
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    print(f"replication factor {args.replication_factor}, seed {args.seed}, median of {args.runs} run(s)\n")
    print("| nodes | partitions | shape | propose s | replica moves | leadership changes | GiB moved | unsatisfied |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for nodes in args.nodes:
        for partitions in args.partitions:
            for shape in args.shapes:
                model, options = cluster(shape, nodes, partitions, args.replication_factor, args.seed)
                seconds = []
                for _ in range(args.runs):
                    started = time.perf_counter()
                    proposal = propose(model, options=options)
                    seconds.append(time.perf_counter() - started)
                unsatisfied = ", ".join(g.goal for g in proposal.goals if not g.satisfied_after) or "none"
                shown = f"{shape} (+{len(options.move_onto)})" if options.move_onto else shape
                print(f"| {nodes} | {partitions:,} | {shown} | {statistics.median(seconds):.2f} | "
                      f"{len(proposal.replica_moves):,} | {len(proposal.leadership_changes):,} | "
                      f"{proposal.bytes_moved / GIB:,.0f} | {unsatisfied} |", flush=True)


if __name__ == "__main__":
    main()
