"""Group coordination: the sans-I/O classic consumer-group coordinator and the `__consumer_offsets` records."""

from odradek.coordinator.group_coordinator import Append, GroupCoordinator, OffsetAndMetadata, Reply

__all__ = ["Append", "GroupCoordinator", "OffsetAndMetadata", "Reply"]
