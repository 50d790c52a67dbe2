"""What exchanges cost, as `reef status` and `reef versions` show it: `$0.0123`, with the exchanges the price table
could not price said as such (never counted as free)."""

from __future__ import annotations

from reef_client.render.formats import MISSING
from reef_contract import Spend, TelemetryState


def spend_text(spend: Spend | None) -> str:
    """`$0.0123`; `$0.0123 + 4 unpriced`; `unpriced (4)` when no exchange had a price; a dash for none."""
    if spend is None or spend["priced"] + spend["unpriced"] == 0:
        return MISSING
    if spend["priced"] == 0:
        return f"unpriced ({spend['unpriced']})"
    usd = f"${spend['usd']:.4f}"
    return f"{usd} + {spend['unpriced']} unpriced" if spend["unpriced"] else usd


def telemetry_text(state: TelemetryState) -> str:
    """`OTLP: 120 spans exported, 3 failed, 0 dropped`."""
    return (
        f"OTLP: {state['exported']} spans exported, {state['failed']} failed to send, {state['dropped']} dropped"
        " (queue full)"
    )
