"""Noticing an answer that loops: a small model that repeats one span of tokens until its context is full.

For each span length `p` up to MAX_PERIOD, a counter holds how many of the answer's last tokens equal the token `p`
before them; once one reaches the limit, the answer's last `limit + p` tokens are one span of `p` tokens repeated
back to back. Each new token costs MAX_PERIOD comparisons, whatever the answer's length.
"""

from __future__ import annotations

MAX_PERIOD = 64  # the longest repeating span looked for, in tokens


class RepetitionWatch:
    """Follows one answer's tokens; `add` says when they have looped over one span for `limit` tokens (0: never)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._runs = [0] * (MAX_PERIOD + 1)

    def add(self, output_ids: list[int]) -> int | None:
        """Take the answer's newest token (the last of `output_ids`); the length of the span it repeats once the
        last `limit` tokens have repeated it, else None."""
        if self.limit <= 0:
            return None
        newest, at = output_ids[-1], len(output_ids) - 1
        looping = None
        for period in range(1, min(MAX_PERIOD, at) + 1):
            if output_ids[at - period] == newest:
                self._runs[period] += 1
                if looping is None and self._runs[period] >= self.limit:
                    looping = period
            else:
                self._runs[period] = 0
        return looping

    def explain(self, period: int) -> str:
        """Why an answer was cut, as its record says."""
        return (
            f"the answer repeated a span of {period} token(s) back to back for {self.limit} tokens "
            "(inference.repeat-stop-tokens)"
        )
