"""SGLang's native HTTP API as reef uses it (field names of SGLang 0.5.15, also accepted by 0.5.23).

`POST /generate` takes prompt ids (`input_ids`), `sampling_params`, `return_logprob` and `stream`; each SSE event
(`data: <json>`, ending with `data: [DONE]`) carries `output_ids` and `meta_info` (`completion_tokens`,
`output_token_logprobs` as `[logprob, token_id, text]`, `weight_version`, `finish_reason`, and from 0.5.23 the
per-token spans `weight_versions`). Events are cumulative, or only the new part when the server runs with
`--incremental-streaming-output`; `new_tokens` reads both, using the cumulative `completion_tokens`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any

from reef_daemon.runtimes.embedded.sampling import SamplingParams

GENERATE = "/generate"
PAUSE = "/pause_generation"
CONTINUE = "/continue_generation"
UPDATE_FROM_DISK = "/update_weights_from_disk"
MODEL_INFO = "/model_info"
LOAD_LORA = "/load_lora_adapter"  # {lora_name, lora_path}: a PEFT folder, served by that name (--enable-lora)
UNLOAD_LORA = "/unload_lora_adapter"  # {lora_name}
HEALTH = "/health"

# Running requests are put back in the queue and re-read their context under the new weights (the default,
# `abort`, would refuse them).
PAUSE_MODE = "retract"
DEFAULT_VERSION = "default"  # what a server started without --weight-version reports


@dataclass(frozen=True)
class Token:
    """One generated token as the server reported it."""

    id: int
    logprob: float
    version: str  # the server's weight-version label


def generate_body(
    prompt_ids: list[int], params: SamplingParams, max_new_tokens: int, adapter: str | None = None
) -> dict[str, Any]:
    """A streaming `/generate` request with output log-probs, served by the loaded LoRA adapter of that name when
    one is given (`lora_path` takes a name as well as a path). Stop sequences are applied by reef (they are cut
    from the text as with the torch engine); the end-of-turn ids are the server's, from the model."""
    sampling: dict[str, Any] = {
        "max_new_tokens": max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "skip_special_tokens": True,
    }
    if params.seed is not None:
        sampling["sampling_seed"] = params.seed
    body: dict[str, Any] = {
        "input_ids": prompt_ids,
        "sampling_params": sampling,
        "return_logprob": True,
        "logprob_start_len": -1,
        "stream": True,
    }
    if adapter is not None:
        body["lora_path"] = adapter
    return body


async def events(lines: AsyncIterable[bytes]) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of an SSE body, until `data: [DONE]` or its end."""
    async for raw in lines:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            return
        event = json.loads(data)
        if isinstance(event, dict):
            yield event


def new_tokens(event: dict[str, Any], seen: int) -> list[Token]:
    """The tokens of `event` after the first `seen` of the answer, each with its log-prob and weight version."""
    meta = event.get("meta_info") or {}
    ids = [int(token) for token in event.get("output_ids") or []]
    total = int(meta.get("completion_tokens", seen + len(ids)))
    fresh = max(0, total - seen)
    ids = ids[len(ids) - fresh :] if fresh else []
    logprobs = (meta.get("output_token_logprobs") or [])[-fresh:] if fresh else []
    if len(logprobs) != len(ids):
        raise ValueError(f"SGLang sent {len(ids)} new tokens with {len(logprobs)} log-probs")
    label = str(meta.get("weight_version", DEFAULT_VERSION))
    spans = meta.get("weight_versions")
    tokens = []
    for offset, (token, entry) in enumerate(zip(ids, logprobs, strict=True)):
        if int(entry[1]) != token:
            raise ValueError(f"SGLang's log-prob entry {entry!r} is not for token {token}")
        index = seen + offset
        tokens.append(Token(token, float(entry[0]), _span_version(spans, index) or label))
    return tokens


def finish_reason(event: dict[str, Any]) -> dict[str, Any] | None:
    """`{type: stop|length|abort, ...}` on the last event, else None."""
    reason = (event.get("meta_info") or {}).get("finish_reason")
    return reason if isinstance(reason, dict) else None


def _span_version(spans: Any, index: int) -> str | None:
    """The version of output token `index` from 0.5.23's `[{version, start, end}]` spans, when sent."""
    if not isinstance(spans, list):
        return None
    for span in spans:
        if isinstance(span, dict) and int(span.get("start", 0)) <= index < int(span.get("end", 0)):
            return str(span.get("version"))
    return None


def update_from_disk_body(model_path: str, version: str) -> dict[str, Any]:
    """Load a Hugging Face folder into the running server. The cache is not flushed: SGLang's flush refuses while
    retracted requests wait (and reef launches servers without the radix cache, so nothing stale is kept)."""
    return {
        "model_path": model_path,
        "weight_version": version,
        "flush_cache": False,
        "abort_all_requests": False,
    }
