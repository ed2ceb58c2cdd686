"""Cluster feature levels (KIP-584): what this version of Odradek supports, what a cluster has finalized, and
the checks of UpdateFeatures.

Kafka names features and levels; a client reads them from ApiVersions. Odradek supports only the levels
whose behaviour it has: group.version 1 is the KIP-848 consumer group protocol (0 turns it off);
metadata.version is fixed at Kafka 4.0's (Odradek's metadata records are its own, so there is nothing to
upgrade or downgrade); kraft.version 0 is a static quorum, transaction.version 0 transactions without an
epoch bump per transaction, eligible.leader.replicas.version 0 no ELR.
"""

from __future__ import annotations

from dataclasses import dataclass

METADATA_VERSION = "metadata.version"
GROUP_VERSION = "group.version"

# name -> (lowest, highest) level this node supports
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    "eligible.leader.replicas.version": (0, 0),
    GROUP_VERSION: (0, 1),
    "kraft.version": (0, 0),
    METADATA_VERSION: (25, 25),  # 4.0-IV3
    "transaction.version": (0, 0),
}
# The levels a new cluster starts with; features not named are at level 0.
DEFAULT_LEVELS: dict[str, int] = {METADATA_VERSION: 25, GROUP_VERSION: 1}

# UpdateFeatures upgrade types (v1+); v0's allow_downgrade=true means a safe downgrade
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@dataclass(frozen=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int


def updates_from_request(version: int, request: dict) -> list[FeatureUpdate]:
    updates = []
    for update in request["feature_updates"]:
        if version == 0:
            kind = SAFE_DOWNGRADE if update.get("allow_downgrade") else UPGRADE
        else:
            kind = update.get("upgrade_type", UPGRADE)
        updates.append(FeatureUpdate(update["feature"], update["max_version_level"], kind))
    return updates


def check_updates(finalized: dict[str, int], updates: list[FeatureUpdate], node_id: int) -> str | None:
    """Why the updates cannot be applied (Kafka's words, for the first failing one), or None."""
    for update in updates:
        problem = _check(finalized.get(update.name, 0), update, node_id)
        if problem is not None:
            return f"The update failed for all features since the following feature had an error: {problem}"
    return None


def _check(current: int, update: FeatureUpdate, node_id: int) -> str | None:
    supported = SUPPORTED_FEATURES.get(update.name)
    prefix = f"Invalid update version {update.level} for feature {update.name}."
    if supported is None:
        return f"{prefix} Local controller {node_id} does not support this feature."
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return f"{prefix} Unknown upgrade type {update.upgrade_type}."
    if update.level < current and update.upgrade_type == UPGRADE:
        return (f"{prefix} Can't downgrade the version of this feature without setting the upgrade type to either "
                "safe or unsafe downgrade.")
    if update.name == METADATA_VERSION and update.level < current:
        return (f"Invalid metadata.version {update.level}. Refusing to perform the requested downgrade because it "
                "might delete metadata information.")
    low, high = supported
    if update.level != 0 and not low <= update.level <= high or update.level == 0 and low > 0:
        return f"{prefix} Local controller {node_id} only supports versions {low}-{high}"
    return None


def finalized_for_api_versions(finalized: dict[str, int]) -> list[dict]:
    """ApiVersions lists features at a level above 0."""
    return [{"name": name, "min_version_level": level, "max_version_level": level}
            for name, level in sorted(finalized.items()) if level > 0]


def supported_for_api_versions() -> list[dict]:
    return [{"name": name, "min_version": low, "max_version": high} for name, (low, high) in SUPPORTED_FEATURES.items()]
