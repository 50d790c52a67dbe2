"""Agent session files read as conversations: one per line of OpenAI chat JSONL, one per session file of Claude Code,
codex and pi. Each reader streams its file and yields conversations and the bad lines it skipped."""

from reef_transcripts.sessions.detect import FORMATS, UnknownFormat, detect_format, read_conversations, session_files
from reef_transcripts.sessions.items import MAX_CONVERSATION_BYTES, BadLine, Conversation

__all__ = [
    "FORMATS",
    "MAX_CONVERSATION_BYTES",
    "BadLine",
    "Conversation",
    "UnknownFormat",
    "detect_format",
    "read_conversations",
    "session_files",
]
