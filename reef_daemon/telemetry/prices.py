"""What a model's tokens cost: a price table (model → USD per million input and output tokens) shipped with reef,
replaced by the deployment's own file (`telemetry.prices`). A model the table does not name has no cost (None),
which is not a cost of 0."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from reef_contract import Spend, StoredRecord, Usage
from reef_daemon.store import TokenSums


class PriceTableError(Exception):
    """A price file that cannot be read, or that does not map models to {"input": N, "output": N}."""


@dataclass(frozen=True)
class Price:
    input_per_million: float
    output_per_million: float


MODELS_REMEMBERED = 4096  # model names (client input) whose price, or lack of one, is kept after the first look-up


class PriceTable:
    """Prices by model name; a dated name (`gpt-4o-2024-08-06`) takes the price of the longest name it starts with."""

    def __init__(self, prices: dict[str, Price]) -> None:
        self._prices = prices
        self._by_length = sorted(prices, key=len, reverse=True)
        self._found: dict[str, Price | None] = {}  # every exchange asks, mostly for the same few models

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        """The file at `path`, or the table shipped with reef."""
        if path is None:
            text = resources.files(__package__).joinpath("prices.json").read_text()
            where = "reef's price table"
        else:
            try:
                text = path.read_text()
            except OSError as error:
                raise PriceTableError(f"telemetry.prices: cannot read {path}: {error.strerror}") from None
            where = f"telemetry.prices ({path})"
        return cls(_parse(text, where))

    def price(self, model: str | None) -> Price | None:
        if not model:
            return None
        if model in self._found:
            return self._found[model]
        found = self._prices.get(model)
        if found is None:
            found = next((self._prices[name] for name in self._by_length if model.startswith(name)), None)
        if len(self._found) < MODELS_REMEMBERED:
            self._found[model] = found
        return found

    def cost_usd(self, model: str | None, usage: Usage) -> float | None:
        """What an exchange cost, or None when the model has no price or the tokens were not counted."""
        price = self.price(model)
        input_tokens, output_tokens = usage.get("input_tokens"), usage.get("output_tokens")
        if price is None or input_tokens is None or output_tokens is None:
            return None
        return (input_tokens * price.input_per_million + output_tokens * price.output_per_million) / 1_000_000

    def record_cost(self, record: StoredRecord) -> float | None:
        """What a stored exchange cost, its tokens priced as the model that answered (else the one asked for)."""
        request = record["request"]
        asked = request.get("model") if isinstance(request, dict) else None
        model = record["model"] or (asked if isinstance(asked, str) else None)
        return self.cost_usd(model, record["usage"])

    def spend(self, sums: list[TokenSums]) -> dict[str, Spend]:
        """What each group's exchanges cost, from their token sums per model."""
        spent: dict[str, Spend] = {}
        for group in sums:
            total = spent.setdefault(group.group, {"usd": 0.0, "priced": 0, "unpriced": 0})
            price = self.price(group.model)
            if price is None:
                total["unpriced"] += group.records
                continue
            total["usd"] += (
                group.input_tokens * price.input_per_million + group.output_tokens * price.output_per_million
            ) / 1_000_000
            total["priced"] += group.records - group.uncounted
            total["unpriced"] += group.uncounted
        return spent


def _parse(text: str, where: str) -> dict[str, Price]:
    try:
        table: Any = json.loads(text)
    except ValueError as error:
        raise PriceTableError(f"{where} is not JSON: {error}") from None
    if not isinstance(table, dict):
        raise PriceTableError(f'{where} must be an object: {{"MODEL": {{"input": USD, "output": USD}}}}')
    prices: dict[str, Price] = {}
    for model, entry in table.items():
        if model.startswith("_"):
            continue  # comments
        numbers = [entry.get(key) if isinstance(entry, dict) else None for key in ("input", "output")]
        if not all(isinstance(n, int | float) and not isinstance(n, bool) and n >= 0 for n in numbers):
            raise PriceTableError(
                f'{where}: "{model}" must be {{"input": USD, "output": USD}} per million tokens, not negative'
            )
        prices[model] = Price(float(numbers[0]), float(numbers[1]))  # type: ignore[arg-type]
    return prices
