"""When reef exports (the standard OTEL_* switches and its own setting), when it captures content, and the price
table a deployment gives it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reef_contract import Usage
from reef_daemon.app import create_app
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import load_settings
from reef_daemon.telemetry import PriceTable, PriceTableError, build_telemetry, capture_asked

PRICES = PriceTable.load()


def test_export_is_off_unless_an_endpoint_is_named_and_the_sdk_is_not_disabled() -> None:
    assert build_telemetry(None, "off", PRICES, {}) is None
    assert build_telemetry(None, "off", PRICES, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) is not None
    assert build_telemetry("http://127.0.0.1:4318", "off", PRICES, {"OTEL_SDK_DISABLED": "TRUE"}) is None


def test_content_is_captured_only_when_asked() -> None:
    assert not capture_asked("off", {})
    assert capture_asked("on", {})
    assert capture_asked("off", {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    assert not capture_asked("off", {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"})


def test_a_dated_model_takes_its_family_price_and_an_unknown_one_has_none() -> None:
    usage: Usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    for _ in range(2):  # the second time from what the first look-up remembered
        assert PRICES.cost_usd("gpt-4o-mini-2024-07-18", usage) == pytest.approx(0.75)
        assert PRICES.cost_usd("my-own-model", usage) is None
    assert PRICES.cost_usd("gpt-4o", {"input_tokens": None, "output_tokens": 3}) is None


@pytest.mark.parametrize(
    ("text", "said"),
    [("not json", "is not JSON"), ('{"m": {"input": -1, "output": 2}}', '"m" must be {"input": USD')],
)
def test_a_bad_price_file_is_refused_at_start_saying_what_to_fix(tmp_path: Path, text: str, said: str) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(text)
    with pytest.raises(PriceTableError, match=re.escape("telemetry.prices")):
        PriceTable.load(prices)
    settings = load_settings(
        overrides={"telemetry.prices": str(prices), "reef.state-dir": str(tmp_path / "state")}, environ={}
    )
    with pytest.raises(SettingsError, match=re.escape(said)):
        create_app(settings)


def test_another_otlp_protocol_is_refused_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    settings = load_settings(
        overrides={"telemetry.otlp-endpoint": "http://127.0.0.1:4317", "reef.state-dir": str(tmp_path / "state")},
        environ={},
    )
    with pytest.raises(SettingsError, match=re.escape("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: reef exports OTLP over HTTP")):
        create_app(settings)
