"""A scripted model that drives a coding agent through a session, one shell command per turn, over streamed chat
completions (what pi asks for) or the Responses API (what codex asks for).

The turn is the number of the agent's tool results in the conversation so far: turn n answers with the n-th
command as a call of the agent's shell tool, and past the last command with `final`. Each tool result the agent
sends back is kept in `results`, so a test can see what the agent's tools printed. With `hold` set, the final turn
waits for that event, so a test can look at the session while the agent is still running.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

MARKER = "You change the harness of the"  # the proposer's AGENTS.md, which the agent puts in its system prompt


@dataclass
class ScriptedAgent:
    commands: list[str] = field(default_factory=list)
    final: str = "Done: the change is in the workspace."
    results: list[str] = field(default_factory=list)
    calls: int = 0
    hold: asyncio.Event | None = None

    def drives(self, payload: dict[str, Any]) -> bool:
        """Is this call from the agent this script drives (its instructions are in the prompt)?"""
        return MARKER in json.dumps(payload)

    def _turn(self, outputs: list[str]) -> str | None:
        self.calls += 1
        self.results = outputs
        return self.commands[len(outputs)] if len(outputs) < len(self.commands) else None

    async def chat(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        outputs = [_text(m.get("content")) for m in payload.get("messages", []) if m.get("role") == "tool"]
        command = self._turn(outputs)
        if command is None and self.hold is not None:
            await self.hold.wait()
        base = {"id": "chatcmpl-agent", "object": "chat.completion.chunk", "created": int(time.time()), "model": "m"}
        if command is None:
            delta: dict[str, Any] = {"role": "assistant", "content": self.final}
            finish = "stop"
        else:
            call = {"index": 0, "id": f"call_{len(outputs)}", "type": "function"}
            call["function"] = {"name": "bash", "arguments": json.dumps({"command": command})}
            delta, finish = {"role": "assistant", "tool_calls": [call]}, "tool_calls"
        frames = [
            {**base, "choices": [{"index": 0, "delta": delta}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
        ]
        return await _stream(request, [f"data: {json.dumps(frame)}\n\n" for frame in frames] + ["data: [DONE]\n\n"])

    async def responses(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        items = payload.get("input", [])
        outputs = [_text(item.get("output")) for item in items if item.get("type") == "function_call_output"]
        command = self._turn(outputs)
        if command is None:
            item: dict[str, Any] = {
                "id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": self.final, "annotations": []}],
            }  # fmt: skip
        else:
            offered = {tool.get("name") for tool in payload.get("tools", [])}
            if "exec_command" in offered:  # codex's shell tool now; older ones offer `shell`
                name, arguments = "exec_command", {"cmd": command, "login": False, "yield_time_ms": 30000}
            else:
                name, arguments = "shell", {"command": ["bash", "-lc", command]}
            item = {"id": f"fc_{len(outputs)}", "type": "function_call", "status": "completed", "name": name,
                    "call_id": f"call_{len(outputs)}", "arguments": json.dumps(arguments)}  # fmt: skip
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        response = {"id": "resp_1", "object": "response", "created_at": int(time.time()), "status": "completed",
                    "model": "m", "output": [item], "usage": usage}  # fmt: skip
        events = [
            ("response.created", {"response": {**response, "status": "in_progress", "output": []}}),
            ("response.output_item.added", {"output_index": 0, "item": item}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
            ("response.completed", {"response": response}),
        ]
        frames = [f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events]
        return await _stream(request, frames)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


async def _stream(request: web.Request, frames: list[str]) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for frame in frames:
        await response.write(frame.encode())
    await response.write_eof()
    return response
