"""Conversations as OpenAI chat messages: from the three inference APIs' requests and answers, and from the session
files coding agents keep (OpenAI chat JSONL, Claude Code, codex, pi). Pure functions over JSON, no I/O but file
reading, so the daemon (export) and the CLI (import) share them."""

from reef_transcripts.chat import Message, append_message, assistant_message, tool_call
from reef_transcripts.requests import answer_message, request_messages, request_tools

__all__ = [
    "Message",
    "answer_message",
    "append_message",
    "assistant_message",
    "request_messages",
    "request_tools",
    "tool_call",
]
