"""The markdown table and the pass/fail list of a proxy_overhead.py result."""

from __future__ import annotations

import statistics
from typing import Any

NAMES = ("direct", "floor-b", "reef", "baseline", "reef+otel", "reef+busy", "reef+token", "reef+pass", "litellm")
DASH = "-"


def _fmt(value: float | None, digits: int) -> str:
    if value is None or value != value:  # None or NaN
        return DASH
    return f"{value:,.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or not b or a != a or b != b:
        return DASH
    return f"{a / b:.2f}x"


def _added(phase: dict[str, Any], metric: str, q: str, name: str) -> float:
    return float(phase[name][metric][q] - phase["direct"][metric][q])


Row = tuple[str, dict[str, float | None], int, bool]


def _rows(result: dict[str, Any], names: list[str]) -> list[Row]:
    """(label, value per target, digits, higher is better) for each line of the table."""
    lat, stream, tput = result["lat"], result["stream"], result["tput"]
    proxies = [n for n in names if n != "direct"]
    c32 = [n for n in names if n not in lat]  # reef+busy, a control measured at c=32 only
    all_proxies, names, proxies = proxies, [n for n in names if n in lat], [n for n in proxies if n in lat]

    def per(fn: Any, among: list[str]) -> dict[str, float | None]:
        return {n: fn(n) for n in among}

    rows: list[Row] = [
        ("c=1 non-stream latency p50, absolute (ms)", per(lambda n: lat[n]["total_ms"]["p50"], names), 3, False),
        ("c=1 non-stream **added p50** (ms)", per(lambda n: _added(lat, "total_ms", "p50", n), proxies), 3, False),
        ("c=1 non-stream **added p99** (ms)", per(lambda n: _added(lat, "total_ms", "p99", n), proxies), 3, False),
        ("c=1 proxy CPU per request (µs)", per(lambda n: lat[n].get("cpu_us_per_request"), proxies), 0, False),
        (
            "stream c=1 **added TTFT p50** (ms)",
            per(lambda n: _added(stream, "ttfb_ms", "p50", n), proxies),
            3,
            False,
        ),
        ("stream c=1 added TTFT p99 (ms)", per(lambda n: _added(stream, "ttfb_ms", "p99", n), proxies), 3, False),
        (
            "stream c=1 added total p50, 20 chunks (ms)",
            per(lambda n: _added(stream, "total_ms", "p50", n), proxies),
            3,
            False,
        ),
        ("stream c=1 proxy CPU per stream (µs)", per(lambda n: stream[n].get("cpu_us_per_request"), proxies), 0, False),
        ("**throughput c=32** (req/s, median window)", per(lambda n: tput[n]["req_per_s"], [*names, *c32]), 0, True),
        ("latency under c=32, p50 (ms)", per(lambda n: _window_median(tput[n], "p50"), [*names, *c32]), 1, False),
        ("latency under c=32, p99 (ms)", per(lambda n: _window_median(tput[n], "p99"), [*names, *c32]), 1, False),
        ("proxy CPU per request at c=32 (µs)", per(lambda n: _window_cpu(tput[n]), all_proxies), 0, False),
        ("RSS after the run (MB)", per(lambda n: result["rss_end_mb"].get(n), proxies), 1, False),
    ]
    return rows


def _window_median(entry: dict[str, Any], q: str) -> float:
    return statistics.median(w["latency_ms"][q] for w in entry["windows"])


def _window_cpu(entry: dict[str, Any]) -> float | None:
    values = [w["cpu_us_per_request"] for w in entry["windows"] if "cpu_us_per_request" in w]
    return statistics.median(values) if values else None


def render(result: dict[str, Any]) -> str:
    names = [n for n in NAMES if n in result["targets"]]
    with_litellm = "litellm" in names
    with_baseline = "baseline" in names
    with_otel = "reef+otel" in names
    # Ratios are "how many times worse": cost / cost, or for throughput the inverse.
    pairs = [("reef", "floor-b")]
    pairs += [("reef", "baseline")] if with_baseline else []
    pairs += [("reef+otel", "reef")] if with_otel else []
    pairs += [("reef+busy", "reef")] if "reef+busy" in names else []
    pairs += [("reef+pass", "reef+token")] if "reef+pass" in names and "reef+token" in names else []
    pairs += [("litellm", "reef")] if with_litellm else []
    titles = {("reef", "floor-b"): "reef vs floor-b", ("reef", "baseline"): "reef vs baseline"}
    titles[("reef+otel", "reef")] = "export on vs off"
    titles[("reef+busy", "reef")] = "client's core busy vs not"
    titles[("reef+pass", "reef+token")] = "client's key passed vs reef's token"
    titles[("litellm", "reef")] = "LiteLLM vs reef"
    header = ["metric", *names, *(titles[pair] for pair in pairs)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, values, digits, higher_is_better in _rows(result, names):
        cells = [label, *(_fmt(values.get(n), digits) if n in values else "" for n in names)]
        for worse, better in pairs:
            a, b = values.get(worse), values.get(better)
            cells.append(_ratio(b, a) if higher_is_better else _ratio(a, b))
        lines.append("| " + " | ".join(cells) + " |")

    soak, verify, lat, stream = result["soak"], result["verify"], result["lat"], result["stream"]
    errors = ", ".join(f"{name} {counts}" for name, counts in result["errors"].items() if counts) or "none"
    lines += [
        "",
        f"Soak (reef only, c={result['settings']['soak_concurrency']}, every 4th request a stream, "
        f"{soak['seconds']:.0f} s): {soak['req_per_s']:,.0f} req/s ({soak['req_per_s_first_tenth']:,.0f} in the "
        f"first tenth, {soak['req_per_s_last_tenth']:,.0f} in the last), latency p50 "
        f"{_fmt(soak['latency_ms']['p50'], 2)} / p99 {_fmt(soak['latency_ms']['p99'], 2)} ms; "
        f"RSS {soak['rss_start_mb']:.1f} -> {soak['rss_end_mb']:.1f} MB (max {soak['rss_max_mb']:.1f}), "
        f"growth {soak['rss_growth_pct']:+.1f}% "
        f"({soak['rss_growth_second_half_pct']:+.1f}% in the second half).",
        "",
        f"Records: {verify['receipts']:,} receipts handed out; {verify['records_listed_by_api']:,} records "
        f"listed by `GET /reef/records`, {verify['records_in_sqlite']:,} in SQLite; receipts missing: "
        f"{verify['missing_from_api']} (API), {verify['missing_from_sqlite']} (SQLite); "
        f"200 answers without a receipt: {verify['answers_without_receipt']}; "
        f"{_fmt(verify.get('rows_per_commit'), 1)} rows per commit.",
        "",
        f"Errors: {errors}. Foreign load (cores busy with other processes, median over blocks): "
        f"lat {_fmt(lat['foreign_cores']['p50'], 2)}, stream {_fmt(stream['foreign_cores']['p50'], 2)}, "
        f"soak {_fmt(soak['foreign_cores'], 2)}.",
        *_spans(result),
        "",
        "Ratio columns say how many times worse the first is (\"reef vs floor-b\": reef's cost / floor-b's; "
        "for throughput the inverse), so 1.0x is a tie."
        + (f" baseline = reef at {result['meta'].get('baseline_commit', '?')}." if with_baseline else ""),
        "",
        "| target | measured | goal | met |",
        "|---|---|---|---|",
    ]
    for goal in targets_met(result):
        met = "yes" if goal["met"] else "**no**"
        lines.append(f"| {goal['what']} | {goal['measured']} | {goal['goal']} | {met} |")
    return "\n".join(lines)


def _spans(result: dict[str, Any]) -> list[str]:
    """reef+otel's own counts of its spans, after the c=1 phases (cores to spare) and after c=32 (none)."""
    said = result.get("spans")
    if not said:
        return []
    parts = [
        f"{when}: {counts['exported']:,} exported, {counts['failed']:,} failed, {counts['dropped']:,} dropped"
        for when, counts in said.items()
    ]
    return ["", "Spans of reef+otel (its `telemetry` status, running totals): " + "; ".join(parts) + "."]


def targets_met(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The proxy's goals (bench/README.md, "Goals"), each with the measured value."""
    lat, stream, tput, soak, verify = (result[k] for k in ("lat", "stream", "tput", "soak", "verify"))
    p50 = _added(lat, "total_ms", "p50", "reef")
    p99 = _added(lat, "total_ms", "p99", "reef")
    ttft = _added(stream, "ttfb_ms", "p50", "reef")
    goals = [
        {"what": "added latency p50, c=1", "measured": f"{p50:.3f} ms", "goal": "≤ 1 ms", "met": p50 <= 1.0},
        {"what": "added latency p99, c=1", "measured": f"{p99:.3f} ms", "goal": "≤ 3 ms", "met": p99 <= 3.0},
        {"what": "added TTFT p50, c=1", "measured": f"{ttft:.3f} ms", "goal": "≤ 1 ms", "met": ttft <= 1.0},
    ]
    floor_p50 = _added(lat, "total_ms", "p50", "floor-b")
    share = tput["reef"]["req_per_s"] / max(tput["floor-b"]["req_per_s"], 1e-9)
    goals += [
        {
            "what": "added p50 vs floor-b",
            "measured": f"{p50 / floor_p50:.1f}x" if floor_p50 > 0 else DASH,
            "goal": "≤ 2x",
            "met": p50 <= 2 * floor_p50,
        },
        {
            "what": "throughput c=32 vs floor-b",
            "measured": f"{share:.0%}",
            "goal": "≥ 50%",
            "met": share >= 0.5,
        },
    ]
    if "litellm" in tput:
        ratio = tput["reef"]["req_per_s"] / max(tput["litellm"]["req_per_s"], 1e-9)
        goals.append(
            {
                "what": "throughput c=32 / LiteLLM",
                "measured": f"{ratio:.1f}x",
                "goal": "≥ 3x",
                "met": ratio >= 3,
            }
        )
    growth = soak["rss_growth_pct"]
    goals.append(
        {
            "what": f"RSS growth, {soak['seconds']:.0f} s soak",
            "measured": f"{growth:+.1f}%",
            "goal": "< 10%",
            "met": growth < 10,
        }
    )
    lost = verify["missing_from_api"] + (verify["missing_from_sqlite"] or 0) + verify["answers_without_receipt"]
    goals.append(
        {
            "what": "records lost",
            "measured": f"{lost} of {verify['receipts']:,}",
            "goal": "0",
            "met": lost == 0,
        }
    )
    return goals
