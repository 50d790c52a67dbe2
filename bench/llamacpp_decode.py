"""llama.cpp's side of bench/embedded_llamacpp.py: greedy decoding of one GGUF with llama-cpp-python's C API, in the
interpreter of bench/.venv-llamacpp (which has llama-cpp-python, not reef). Prints one JSON object.

For each of `--streams` (say 1 and 4): that many copies of the prompt are read, then decoded together, one token
for every sequence per `llama_decode` (each its own sequence id, as llama.cpp's server batches requests), greedy
(the largest logit), `--tokens` tokens a sequence, an end-of-text token not stopping it. Tokens/s is each
sequence's tokens after its first over the time from the first token to the last, and the aggregate is all
sequences' tokens over the same time. The median of `--rounds` runs.

    bench/.venv-llamacpp/bin/python bench/llamacpp_decode.py --gguf PATH --prompt TEXT [--threads N]
        [--tokens 128] [--streams 1 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import llama_cpp  # type: ignore[import-not-found]  # only in bench/.venv-llamacpp
import numpy as np


class Decoder:
    def __init__(self, gguf: str, threads: int, sequences: int, context: int) -> None:
        llama_cpp.llama_backend_init()
        self.model = llama_cpp.llama_model_load_from_file(gguf.encode(), llama_cpp.llama_model_default_params())
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = context * sequences
        params.n_batch = max(512, context)
        params.n_seq_max = sequences
        params.n_threads = params.n_threads_batch = threads
        self.ctx = llama_cpp.llama_init_from_model(self.model, params)
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.batch = llama_cpp.llama_batch_init(params.n_batch, 0, sequences)

    def tokenize(self, text: str) -> list[int]:
        raw = text.encode()
        out = (llama_cpp.llama_token * (len(raw) + 16))()
        count = llama_cpp.llama_tokenize(self.vocab, raw, len(raw), out, len(out), True, True)
        return list(out[:count])

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """(token, position, sequence, wants logits) per entry, in one llama_decode."""
        batch = self.batch
        for index, (token, position, sequence, logits) in enumerate(entries):
            batch.token[index] = token
            batch.pos[index] = position
            batch.n_seq_id[index] = 1
            batch.seq_id[index][0] = sequence
            batch.logits[index] = logits
        batch.n_tokens = len(entries)
        if llama_cpp.llama_decode(self.ctx, batch) != 0:
            raise SystemExit("llama_decode failed")

    def _greedy(self, index: int) -> int:
        logits = llama_cpp.llama_get_logits_ith(self.ctx, index)
        return int(np.ctypeslib.as_array(logits, shape=(self.n_vocab,)).argmax())

    def run(self, prompt: list[int], sequences: int, tokens: int) -> dict[str, float]:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        last: list[int] = []
        for sequence in range(sequences):  # the prompts read one after another, each giving its first token
            self._decode([(t, p, sequence, p == len(prompt) - 1) for p, t in enumerate(prompt)])
            last.append(self._greedy(len(prompt) - 1))
        began = time.perf_counter()
        for step in range(tokens - 1):
            self._decode([(last[s], len(prompt) + step, s, True) for s in range(sequences)])
            last = [self._greedy(s) for s in range(sequences)]
        seconds = time.perf_counter() - began
        return {"tok_s": (tokens - 1) / seconds, "aggregate_tok_s": sequences * (tokens - 1) / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    decoder = Decoder(args.gguf, args.threads, max(args.streams), 1024)
    prompt = decoder.tokenize(args.prompt)
    decoder.run(prompt, 1, 8)  # warm-up
    result: dict[str, Any] = {"llama_cpp": llama_cpp.__version__, "threads": args.threads, "prompt": len(prompt)}
    for streams in args.streams:
        runs = [decoder.run(prompt, streams, args.tokens) for _ in range(args.rounds)]
        result[str(streams)] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
