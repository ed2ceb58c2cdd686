"""ACL sync of a cluster link (sans-I/O): which of the source's ACL bindings a link copies, and what one pass
creates and deletes on the destination. sync.py asks both clusters for their bindings and makes the changes.

A link with sync_acls copies the source's LITERAL bindings on what it mirrors: TOPIC bindings whose topic is
one of its active mirror topics, and GROUP bindings whose group its group patterns select. It does not copy
PREFIXED bindings, nor the LITERAL wildcard `*`, nor bindings on other resource types (the cluster,
transactional ids): on the destination they would cover topics and groups the link does not mirror (a prefix
also matches the destination's own topics, `*` all of them), so those are for the destination's
administrators to grant. Principals are copied as they are: the destination must know the same users.

A link removes only the bindings it created itself, which it records (`acls/<link>` in `__cluster_links`):
- a selected binding the destination lacks is created, and recorded;
- a selected binding the destination has already (its administrators made it) is neither created nor
  recorded, so the link never removes it;
- a recorded binding the source no longer has is deleted;
- a recorded binding the destination's administrators deleted is created again while the source has it;
- a recorded binding whose topic or group is no longer the link's (a promoted mirror) stays, forgotten: an
  ordinary binding from then on, so consumers keep their access after a failover.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from odradek.links.definition import LinkDefinition
from odradek.security.acl import WILDCARD, AclBinding, PatternType, ResourceType


@dataclass(frozen=True)
class AclChanges:
    """One pass of a link's ACL sync, made in this order: record `intent`, create, delete, record `copied`.
    A crash at any point then leaves no binding the link created unrecorded."""

    create: frozenset[AclBinding]
    delete: frozenset[AclBinding]
    copied: frozenset[AclBinding]  # the bindings the link has created here, once the changes are made
    released: frozenset[AclBinding]  # recorded, but out of the link's scope now: left here and forgotten

    @property
    def intent(self) -> frozenset[AclBinding]:
        """What to record before making the changes: what the link will have created, and what it has yet to
        delete."""
        return self.copied | self.delete


def in_scope(link: LinkDefinition, mirror_topics: Set[str], binding: AclBinding) -> bool:
    """Whether a binding is one the link copies: LITERAL, on one of its active mirror topics or on a group
    its patterns select (never the wildcard `*`)."""
    if binding.pattern_type != PatternType.LITERAL or binding.resource_name == WILDCARD:
        return False
    if binding.resource_type == ResourceType.TOPIC:
        return binding.resource_name in mirror_topics
    if binding.resource_type == ResourceType.GROUP:
        return link.mirrors_group(binding.resource_name)
    return False


def plan_acl_sync(link: LinkDefinition, mirror_topics: Set[str], source: Iterable[AclBinding],
                  destination: Iterable[AclBinding], recorded: Iterable[AclBinding]) -> AclChanges:
    """The changes that bring the destination's copies of the link's bindings in step with the source.
    `mirror_topics`: the link's active mirror topics; `source` and `destination`: the clusters' bindings (any
    others than the link's are ignored); `recorded`: what the link has recorded as created here."""
    selected = {b for b in source if in_scope(link, mirror_topics, b)}
    present, recorded = set(destination), set(recorded)
    mine = {b for b in recorded if in_scope(link, mirror_topics, b)}
    create = selected - present
    return AclChanges(create=frozenset(create), delete=frozenset((mine - selected) & present),
                      copied=frozenset((mine & selected) | create), released=frozenset(recorded - mine))
