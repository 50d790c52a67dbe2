"""The headers reef reads and sends. Names are lower-case, as the proxy compares them; every header of reef's own
starts with REEF_HEADER_PREFIX, so the proxy neither forwards one upstream nor relays one from upstream."""

from __future__ import annotations

from typing import Final

# The start of every header of reef's own.
REEF_HEADER_PREFIX: Final = "x-reef-"
# Sent by an agent: the scenario (workload) its requests belong to; an inference request needs it.
SCENARIO_HEADER: Final = "x-reef-scenario"
# Answered on every inference response: the receipt of its record, which a report scores.
RECEIPT_HEADER: Final = "x-reef-agent-record-id"
# Answered on every inference response: the milliseconds reef added to it, the commit of its record included.
OVERHEAD_HEADER: Final = "x-reef-overhead-ms"
# Answered on an inference response whose request made a new scenario named like an existing one (a typo in
# x-reef-scenario, say): what was made and the name it is close to. The daemon's log says it too.
NEW_SCENARIO_HEADER: Final = "x-reef-new-scenario"
# Sent by a client: reef's token in a header of its own, so that its `Authorization` / `x-api-key` can be the client's
# own login, which inference.client-auth=pass forwards upstream.
TOKEN_HEADER: Final = "x-reef-token"  # noqa: S105 - a header name
# Sent by an agent: `x-reef-tag-NAME: VALUE` tags the record with NAME=VALUE.
TAG_HEADER_PREFIX: Final = "x-reef-tag-"
# The tag that groups the records of one agent session.
SESSION_HEADER: Final = f"{TAG_HEADER_PREFIX}session"
# The tag naming the harness release the agent runs.
RELEASE_HEADER: Final = f"{TAG_HEADER_PREFIX}release"
# Answered by the install route when it cannot build a script: why.
INSTALL_ERROR_HEADER: Final = "x-reef-install-error"
# `GET /reef/export` names in this header how many records it will read (the lines may be fewer).
EXPORT_TOTAL_HEADER: Final = "x-reef-export-records"
