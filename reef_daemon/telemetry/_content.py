"""An exchange's conversation as span attributes (the GenAI conventions' input, output and system instructions), for
when content capture is asked for."""

from __future__ import annotations

import json
from typing import Any

from reef_contract import StoredRecord


def conversation_attributes(record: StoredRecord) -> dict[str, str]:
    """The conversation as JSON strings (span attributes cannot hold structures in Python's SDK); an attribute with
    nothing to say is left out."""
    request: dict[str, Any] = record["request"] if isinstance(record["request"], dict) else {}
    answer = record["answer"]
    messages = request.get("messages", request.get("input"))
    output = None
    if answer is not None:
        parts = [
            {"type": "text", "content": part["text"]} if part["type"] == "text" else {"type": part["type"]}
            for part in answer["parts"]
        ]
        output = [{"role": "assistant", "parts": parts, "finish_reason": answer["finish_reason"] or "stop"}]
    system = request.get("system") if isinstance(request.get("system"), str) else None
    attributes = {
        "gen_ai.input.messages": json.dumps(messages, ensure_ascii=False) if messages is not None else None,
        "gen_ai.output.messages": json.dumps(output, ensure_ascii=False) if output is not None else None,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": system}]) if system else None,
    }
    return {name: value for name, value in attributes.items() if value is not None}
