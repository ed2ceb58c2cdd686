"""The partition balancer's sans-I/O core: a load model, goals in Cruise Control's priority order, and an
optimizer from (model, goals, options) to a proposal of replica moves and leadership changes.

    from odradek.balancer import ClusterModel, Node, Partition, ProposalOptions, propose, apply

    proposal = propose(model)                                   # rebalance with the default goals
    proposal = propose(model, options=ProposalOptions(remove={4}))   # drain node 4
    after = apply(model, proposal)                               # the model once it is carried out

docs/balancer.md describes the model, the goals and their settings, and how the optimizer decides.
"""

from odradek.balancer.goals import (
    GOAL_TYPES,
    SETTING_NAMES,
    BalancerSettings,
    Goal,
    default_goals,
    goals_by_name,
)
from odradek.balancer.model import BalancerError, ClusterModel, LogDir, Node, NodeLoad, Partition
from odradek.balancer.optimizer import (
    GoalReport,
    LeadershipChange,
    Proposal,
    ProposalOptions,
    ReplicaMove,
    apply,
    check_goals,
    propose,
)

__all__ = [
    "GOAL_TYPES", "SETTING_NAMES", "BalancerError", "BalancerSettings", "ClusterModel", "Goal", "GoalReport",
    "LeadershipChange", "LogDir", "Node", "NodeLoad", "Partition", "Proposal", "ProposalOptions", "ReplicaMove",
    "apply", "check_goals", "default_goals", "goals_by_name", "propose",
]
