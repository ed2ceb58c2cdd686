"""Status conditions as Strimzi writes them, shared by every resource the operator reconciles."""

from __future__ import annotations

import datetime
from collections.abc import Mapping


def status_conditions(old_status: Mapping, wanted: list[tuple[str, str, str]]) -> list[dict]:
    """Conditions of status True, Strimzi's way (Ready, or NotReady with a reason; Warning beside either);
    lastTransitionTime kept from the previous status while a condition does not change."""
    previous = {(c.get("type"), c.get("reason")): c for c in old_status.get("conditions") or []}
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = []
    for type_, reason, message in wanted:
        condition = {"type": type_, "status": "True", "reason": reason, "message": message}
        before = previous.get((type_, reason), {})
        same = before.get("status") == condition["status"]
        condition["lastTransitionTime"] = before.get("lastTransitionTime", now) if same else now
        conditions.append(condition)
    return conditions


def observed_generation(resource: Mapping) -> dict:
    """The status field saying which spec a pass read: {"observedGeneration": n}, or nothing without one."""
    generation = (resource.get("metadata") or {}).get("generation")
    return {} if generation is None else {"observedGeneration": generation}
