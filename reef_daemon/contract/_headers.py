"""The headers reef reads and sends. Names are lower-case, as the proxy compares them; every header of reef's own
starts with REEF_HEADER_PREFIX, so the proxy neither forwards one upstream nor relays one from upstream."""

from __future__ import annotations

from typing import Final

REEF_HEADER_PREFIX: Final = "x-reef-"
SCENARIO_HEADER: Final = "x-reef-scenario"
RECEIPT_HEADER: Final = "x-reef-agent-record-id"
OVERHEAD_HEADER: Final = "x-reef-overhead-ms"
TAG_HEADER_PREFIX: Final = "x-reef-tag-"
SESSION_HEADER: Final = f"{TAG_HEADER_PREFIX}session"
RELEASE_HEADER: Final = f"{TAG_HEADER_PREFIX}release"
INSTALL_ERROR_HEADER: Final = "x-reef-install-error"
# `GET /reef/export` names in this header how many records it will read (the lines may be fewer).
EXPORT_TOTAL_HEADER: Final = "x-reef-export-records"
