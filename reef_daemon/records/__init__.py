"""Records and what is derived from them: the drafts the proxy and imports hand to the store, the answer assembled
from a response or a recorded stream, the first words lists show, and the summary the writer stores beside the
bytes. Imports neither the proxy nor the store; both import it."""

from reef_daemon.records.assemble import assemble, json_object
from reef_daemon.records.drafts import ClientRecordDraft, InferenceDraft
from reef_daemon.records.facts import ExchangeFacts
from reef_daemon.records.frames import FRAME_DELIMITER, parse_frame, split_frames
from reef_daemon.records.preview import opening_turn, preview
from reef_daemon.records.summary import InferenceSummary, stored_answer, summarize

__all__ = [
    "FRAME_DELIMITER",
    "ClientRecordDraft",
    "ExchangeFacts",
    "InferenceDraft",
    "InferenceSummary",
    "assemble",
    "json_object",
    "opening_turn",
    "parse_frame",
    "preview",
    "split_frames",
    "stored_answer",
    "summarize",
]
