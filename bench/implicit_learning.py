"""The proof: does reef learn from plain use? A placebo-controlled benchmark on the SAO demo's task.

One `reef serve --recipe sao` on the embedded model (SmolLM2-135M-Instruct) trains a LoRA adapter per scenario; each
arm and seed is a scenario of its own, fed the same training requests (the toy task's capitals, recipes/sao/examples/
toy/task.py) and asked the same held-out questions before and after: countries training never asks, in a question
template training never uses. The arms differ only in where the scores come from:

- `oracle`: a person's score (the task's own check) reported for each answer;
- `next-turn`: a scripted user replies to each answer in words the rules cannot label ("Next one, please." or "Not
  the one I meant.") and a scripted judge (tests/support/fake_judge.py, in a process of its own as a judge endpoint
  is) reads the reply;
- `rules`: a scripted user replies in plain words ("Thanks, that's right." or "No, that's wrong.") and asks again (a
  regenerate) after a wrong answer: the rule-based signals score (the reply's words, `reports.words`, and the
  retry, `reports.retry`, both on by default) and the judge is never asked, since the rules labelled the reply;
- `placebo`: the rules arm's words and retries, but each chosen at random with the success rate of the answers so
  far, so the scores carry no information about the answer they follow.

Every arm runs on the same daemon, with every signal at its default and the next-turn judge on: the words a user
says decide which signal scores an answer.

The multi-turn variant drives a few 5-turn conversations (each reply carries the verdict on the last answer and the
next question) through the next-turn judge and counts the rollouts training refused as stale.

A benchmark, not a test: it asserts nothing. Each arm's held-out change (after - before, per question over the same
sampling seeds) and each arm's paired difference with the placebo get 95 % bootstrap intervals over seeds and
questions (reef_cli/demo_stats.py); the judge's and the rules' scores are compared with the oracle's check.

    nice -n 10 .venv/bin/python bench/implicit_learning.py --out /tmp/implicit-learning            # the full run
    .venv/bin/python bench/implicit_learning.py --quick --out /tmp/implicit-learning-quick          # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recipes.sao.examples.toy import task  # noqa: E402
from reef_cli.daemon_process import start_daemon, stop_daemon  # noqa: E402
from reef_cli.demo_stats import Estimate, change, difference, question_changes  # noqa: E402
from reef_cli.state import DaemonFiles  # noqa: E402
from reef_client import ReefClient  # noqa: E402
from reef_contract import RECEIPT_HEADER, SCENARIO_HEADER, SESSION_HEADER  # noqa: E402
from reef_daemon.reports.words import read_words  # noqa: E402
from reef_daemon.runtimes.model_cache import user_model_cache  # noqa: E402

ARMS = ("oracle", "next-turn", "rules", "placebo")
# arm -> the report sources that score it
DERIVED = {"next-turn": ("next-turn",), "rules": ("words", "retry"), "placebo": ("words", "retry")}
# Held out twice: countries training never asks (task.HELD_OUT), in a template training never uses.
HELD_OUT_QUESTION = "Name the capital city of {country}, in one word."
RIGHT = "Thanks, that's right."  # the rules' words (and the placebo's)
WRONG = "No, that's wrong."
NOT_RANKED = "person,words,retry,next-turn"  # the sources that train here
JUDGED_RIGHT = "Next one, please."  # words the rules leave to the judge
JUDGED_WRONG = "Not the one I meant."
REPLY_TOKENS = 1  # the scripted user's reply is a request too; its own answer is never looked at
EVALUATION_WORKERS = 16
STEP_TIMEOUT_S = 60.0  # a step that does not come within this is counted as missing (its reports never came)
POLL_S = 0.2


@dataclass(frozen=True)
class Plan:
    """How big a run is: per seed and arm, `prompts` x `group` training rollouts, `batch` a step; the held-out
    questions asked `samples` times each; `conversations` x `turns` in the multi-turn variant."""

    prompts: int = 8
    group: int = 4
    batch: int = 4
    samples: int = 4
    conversations: int = 4
    turns: int = 5
    learning_rate: str = "1e-3"
    critic_warmup_steps: str = "1"


QUICK = Plan(prompts=4, group=2, batch=4, samples=2, conversations=2, turns=3)


Scores = list[list[float]]  # per held-out question, per sample: 1 right, 0 wrong


@dataclass(frozen=True)
class Question:
    """A capital question in one of the two templates, checked as the toy task checks it."""

    country: str
    template: str

    @property
    def text(self) -> str:
        return self.template.format(country=self.country)

    def right(self, reply: str) -> bool:
        return task.score(task.Prompt(self.country), reply) == 1.0


@dataclass
class ArmResult:
    """One arm's run for one seed, in its own scenario."""

    arm: str
    seed: int
    scenario: str
    before: Scores
    after: Scores = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)  # the oracle's check of each training answer
    sent: list[float] = field(default_factory=list)  # the score each answer was given (reported or said in words)
    derived: list[float | None] = field(default_factory=list)  # the derived report each answer got (None: none)
    steps: int = 0
    missing_steps: int = 0  # steps that never came (their reports did not arrive)
    failed_positive_share: list[float] = field(default_factory=list)  # per step that reported it
    ineligible: dict[str, int] = field(default_factory=dict)
    report_sources: dict[str, int] = field(default_factory=dict)  # the training answers' reports, by source
    seconds: float = 0.0


class Daemon:
    """One daemon's URL and clients for it; one HTTP client per thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._local = threading.local()

    def http(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "http", None)
        if client is None:
            client = self._local.http = httpx.Client(base_url=self.url, timeout=600.0)
        return client

    def reef(self) -> ReefClient:
        client: ReefClient | None = getattr(self._local, "reef", None)
        if client is None:
            client = self._local.reef = ReefClient(self.url, timeout_s=600.0)
        return client

    def chat(
        self, scenario: str, session: str, messages: list[dict[str, str]], seed: int, tokens: int
    ) -> tuple[str, str]:
        """One chat completion in `scenario`, tagged with `session`: its receipt and text."""
        body = {"model": "reef", "messages": messages, "temperature": 1.0, "seed": seed, "max_tokens": tokens}
        headers = {SCENARIO_HEADER: scenario, SESSION_HEADER: session}
        response = self.http().post("/v1/chat/completions", json=body, headers=headers)
        response.raise_for_status()
        return response.headers[RECEIPT_HEADER], str(response.json()["choices"][0]["message"]["content"] or "")

    def training(self, scenario: str) -> dict[str, Any] | None:
        state = self.reef().status()["training"]["scenarios"].get(scenario)
        return dict(state) if state is not None else None


def judge_process() -> tuple[subprocess.Popen[bytes], str]:
    """The scripted judge of the tests, served in a process of its own on a free port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    code = (
        "from aiohttp import web; from tests.support.fake_judge import FakeJudge; "
        f"web.run_app(FakeJudge().app(), host='127.0.0.1', port={port}, print=None)"
    )
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(400):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return process, url
        time.sleep(0.05)
    process.terminate()
    raise RuntimeError("the scripted judge did not start")


@contextmanager
def daemon(plan: Plan, settings: dict[str, str], out: Path) -> Iterator[Daemon]:
    """`reef serve --recipe sao` on LoRA adapters, a temporary state directory, the user's model cache; its log is
    kept in `out` (daemon.log)."""
    with tempfile.TemporaryDirectory(prefix="reef-implicit-") as tmp:
        state = Path(tmp)
        cache = user_model_cache()
        cache.mkdir(parents=True, exist_ok=True)
        (state / "models").symlink_to(cache, target_is_directory=True)
        every = {
            "reef.state-dir": str(state),
            "reef.port": "0",
            "training.adapter": "lora",
            "training.batch-size": str(plan.batch),
            "training.max-staleness": "0",
            "training.learning-rate": plan.learning_rate,
            "training.critic-warmup-steps": plan.critic_warmup_steps,
            "training.checkpoint-every": "1000",
            **settings,
        }
        args = ["--recipe", "sao"] + [part for key, value in every.items() for part in (f"--{key}", value)]
        files = DaemonFiles(state)
        started = start_daemon(files, args, "127.0.0.1", 0)
        try:
            yield Daemon(started.url)
        finally:
            stop_daemon(started.pid)
            shutil.copyfile(files.log_file, out / "daemon.log")


def training_plan(seed: int, plan: Plan) -> list[tuple[Question, int]]:
    """The toy task's training requests for `seed` (round-robin over its questions), in the training template."""
    chosen = task.rollouts(seed, plan.prompts, plan.group, grouped=False)
    return [(Question(rollout.prompt.country, task.QUESTION), rollout.seed) for rollout in chosen]


def evaluation_plan(seed: int, plan: Plan) -> list[tuple[Question, int]]:
    return [(Question(r.prompt.country, HELD_OUT_QUESTION), r.seed) for r in task.evaluation(seed, plan.samples)]


def evaluate(reef: Daemon, scenario: str, items: list[tuple[Question, int]]) -> Scores:
    """The served weights' scores on the held-out items in `scenario` (never scored, so never trained on)."""

    def ask(item: tuple[Question, int]) -> float:
        question, seed = item
        _, text = reef.chat(scenario, f"eval-{uuid.uuid4().hex}", [{"role": "user", "content": question.text}],
                            seed, task.MAX_TOKENS)  # fmt: skip
        return 1.0 if question.right(text) else 0.0

    with ThreadPoolExecutor(EVALUATION_WORKERS) as pool:
        scores = list(pool.map(ask, items))
    by_country: dict[str, list[float]] = {}
    for (question, _), score in zip(items, scores, strict=True):
        by_country.setdefault(question.country, []).append(score)
    return list(by_country.values())


def wait_for_step(reef: Daemon, scenario: str, step: int) -> dict[str, Any] | None:
    """Step `step`'s metrics once committed; None when it did not come within STEP_TIMEOUT_S."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        state = reef.training(scenario)
        if state is not None:
            if state["error"]:
                raise RuntimeError(f"training {scenario} failed: {state['error']}")
            if state["steps"] >= step and state["running_since"] is None:
                last = state["last_step"]
                return dict(last["metrics"]) if last else {}
        time.sleep(POLL_S)
    return None


@dataclass(frozen=True)
class Answer:
    """A training answer: its receipt, the session it was asked in, the conversation so far, the oracle's check."""

    receipt: str
    session: str
    conversation: list[dict[str, str]]
    reward: float


def train_arm(reef: Daemon, result: ArmResult, items: list[tuple[Question, int]], batch: int) -> None:
    """Ask `batch` training questions at once, score each the arm's way, wait for the step they fill."""
    placebo = random.Random(f"placebo-{result.seed}")

    def ask(item: tuple[Question, int]) -> Answer:
        question, seed = item
        session = f"{result.scenario}-{uuid.uuid4().hex}"
        messages = [{"role": "user", "content": question.text}]
        receipt, text = reef.chat(result.scenario, session, messages, seed, task.MAX_TOKENS)
        said = [*messages, {"role": "assistant", "content": text}]
        return Answer(receipt, session, said, 1.0 if question.right(text) else 0.0)

    def reply(answer: Answer, score: float) -> None:
        right, wrong = (JUDGED_RIGHT, JUDGED_WRONG) if result.arm == "next-turn" else (RIGHT, WRONG)
        words = {"role": "user", "content": right if score else wrong}
        reef.chat(result.scenario, answer.session, [*answer.conversation, words], 0, REPLY_TOKENS)
        if result.arm != "next-turn" and not score:  # and asks again for another answer (a regenerate)
            reef.chat(result.scenario, answer.session, answer.conversation[:-1], 1, REPLY_TOKENS)

    receipts: list[str] = []
    with ThreadPoolExecutor(batch) as pool:
        for start in range(0, len(items) - batch + 1, batch):
            answered = list(pool.map(ask, items[start : start + batch]))
            rewards = [answer.reward for answer in answered]
            result.rewards += rewards
            if result.arm == "placebo":
                rate = sum(result.rewards) / len(result.rewards)
                said = [1.0 if placebo.random() < rate else 0.0 for _ in answered]
            else:
                said = rewards
            result.sent += said
            receipts += [answer.receipt for answer in answered]
            if result.arm == "oracle":
                for answer, score in zip(answered, said, strict=True):
                    reef.reef().report(result.scenario, [answer.receipt], score=score)
            else:
                list(pool.map(reply, answered, said))
            metrics = wait_for_step(reef, result.scenario, result.steps + 1)
            if metrics is None:
                result.missing_steps += 1
                if result.steps == 0:  # not one step's reports came: this daemon does not score this arm
                    break
                continue
            result.steps += 1
            share = metrics.get("failed_positive_share")
            if isinstance(share, int | float):
                result.failed_positive_share.append(float(share))
    sources = DERIVED.get(result.arm, ())
    for receipt in receipts:
        every = reef.reef().record(receipt)["reports"]
        for report in every:
            source = str(report["source"])
            result.report_sources[source] = result.report_sources.get(source, 0) + 1
        reports = [r for r in every if r["source"] in sources]
        result.derived.append(reports[-1]["score"] if reports else None)
    state = reef.training(result.scenario) or {}
    result.ineligible = dict(state.get("ineligible") or {})


def run_seed(reef: Daemon, arms: list[str], seed: int, plan: Plan, log: Callable[[str], None]) -> list[ArmResult]:
    """The arms of one seed side by side on the daemon (their requests decode together): held-out before (once:
    every arm's scenario serves the base until it trains), training, held-out after."""
    began = time.perf_counter()
    held_out = evaluation_plan(seed, plan)
    before = evaluate(reef, f"s{seed}-before", held_out)
    log(f"seed {seed}: held-out before {_rate(before):.3f} ({time.perf_counter() - began:.0f} s)")
    results = [ArmResult(arm, seed, f"s{seed}-{arm}", before) for arm in arms]
    items = training_plan(seed, plan)

    def one(result: ArmResult) -> None:
        started = time.perf_counter()
        train_arm(reef, result, items, plan.batch)
        result.after = evaluate(reef, result.scenario, held_out)
        result.seconds = time.perf_counter() - started
        log(f"seed {seed} {result.arm}: {result.steps} steps ({result.missing_steps} missing), training reward "
            f"{_mean(result.rewards):.3f}, held-out {_rate(before):.3f} -> {_rate(result.after):.3f} "
            f"({result.seconds:.0f} s)")  # fmt: skip

    with ThreadPoolExecutor(len(results)) as pool:
        list(pool.map(one, results))
    return results


@dataclass
class MultiTurn:
    """The multi-turn variant: what it sent, the next-turn reports it got, what training did with them."""

    conversations: int
    turns: int
    rollouts: int = 0
    reports: int = 0
    steps: int = 0
    refused: dict[str, int] = field(default_factory=dict)


def multi_turn(reef: Daemon, plan: Plan) -> MultiTurn:
    """`conversations` conversations of `turns` turns at once, each reply judging the last answer and asking the
    next question, with no wait for training between turns: how many rollouts training refused, and why."""
    scenario = "multi-turn"
    countries = task.training_countries()
    outcome = MultiTurn(plan.conversations, plan.turns)
    receipts: list[str] = []
    lock = threading.Lock()

    def converse(number: int) -> None:
        draw = random.Random(f"multi-turn-{number}")
        session = f"{scenario}-{number}"
        messages: list[dict[str, str]] = []
        said, last = "", None
        for _ in range(plan.turns):
            question = Question(draw.choice(countries), task.QUESTION)
            messages.append({"role": "user", "content": f"{said} {question.text}".strip()})
            receipt, text = reef.chat(scenario, session, messages, draw.randrange(2**31), task.MAX_TOKENS)
            messages.append({"role": "assistant", "content": text})
            said = JUDGED_RIGHT if question.right(text) else JUDGED_WRONG
            with lock:
                receipts.append(receipt)
            if last is not None:  # the user reads the answer while the judge scores the one before
                wait_for_report(reef, last, "next-turn")
            last = receipt

    with ThreadPoolExecutor(plan.conversations) as pool:
        list(pool.map(converse, range(plan.conversations)))
    outcome.rollouts = len(receipts)
    judged = plan.conversations * (plan.turns - 1)  # a conversation's last answer has no next message
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        state = reef.training(scenario) or {}
        settled = state.get("steps", 0) * plan.batch + sum((state.get("ineligible") or {}).values())
        if state and state["running_since"] is None and settled + state.get("waiting_units", 0) >= judged:
            break
        time.sleep(POLL_S)
    state = reef.training(scenario) or {}
    outcome.steps = int(state.get("steps", 0))
    outcome.refused = dict(state.get("ineligible") or {})
    outcome.reports = sum(
        any(r["source"] == "next-turn" for r in reef.reef().record(receipt)["reports"]) for receipt in receipts
    )
    return outcome


def wait_for_report(reef: Daemon, receipt: str, source: str) -> bool:
    """Whether the record got a report from `source` within STEP_TIMEOUT_S."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(report["source"] == source for report in reef.reef().record(receipt)["reports"]):
            return True
        time.sleep(POLL_S)
    return False


def confusion(results: list[ArmResult]) -> dict[str, int]:
    """The derived scores against the oracle's check: high/low/none for right and wrong answers."""
    counts = {f"{truth} -> {said}": 0 for truth in ("right", "wrong") for said in ("high", "low", "none")}
    for result in results:
        for reward, derived in zip(result.rewards, result.derived, strict=True):
            said = "none" if derived is None else "high" if derived >= 0.5 else "low"
            counts[f"{'right' if reward else 'wrong'} -> {said}"] += 1
    return counts


def summary(results: list[ArmResult], multi: MultiTurn | None, seconds: float, plan: Plan) -> dict[str, Any]:
    by_arm: dict[str, list[ArmResult]] = {}
    for result in results:
        by_arm.setdefault(result.arm, []).append(result)
    arms: dict[str, Any] = {}
    for arm, runs in by_arm.items():
        runs.sort(key=lambda run: run.seed)
        changes = [question_changes(run.before, run.after) for run in runs]
        shares = [share for run in runs for share in run.failed_positive_share]
        arms[arm] = {
            "before": _mean([_rate(run.before) for run in runs]),
            "after": _mean([_rate(run.after) for run in runs]),
            "change": _estimate(change(changes)),
            "per_seed": {run.seed: round(_rate(run.after) - _rate(run.before), 3) for run in runs},
            "training_reward": _mean([_mean(run.rewards) for run in runs]),
            "steps": sum(run.steps for run in runs),
            "missing_steps": sum(run.missing_steps for run in runs),
            "failed_positive_share": _mean(shares) if shares else None,
            "ineligible": _merged([run.ineligible for run in runs]),
            "reports": _merged([run.report_sources for run in runs]),
            "confusion": confusion(runs) if arm in DERIVED else None,
        }
        if arm != "placebo" and "placebo" in by_arm:
            placebo = sorted(by_arm["placebo"], key=lambda run: run.seed)
            if [run.seed for run in placebo] == [run.seed for run in runs]:
                control = [question_changes(run.before, run.after) for run in placebo]
                arms[arm]["minus_placebo"] = _estimate(difference(changes, control))
    return {
        "plan": asdict(plan),
        "seconds": round(seconds),
        "arms": arms,
        "multi_turn": asdict(multi) if multi is not None else None,
        "runs": [asdict(result) for result in results],
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| arm | held-out before -> after | change [95 %] | minus placebo [95 %] | training reward | steps (missing) "
        "| failed answers pushed up |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, figures in result["arms"].items():
        share = figures["failed_positive_share"]
        if figures["steps"] == 0:
            lines.append(f"| {arm} | not trained: the daemon made no report for it | | | | 0 | |")
            continue
        lines.append(
            f"| {arm} | {figures['before']:.3f} -> {figures['after']:.3f} | {_text(figures['change'])} "
            f"| {_text(figures['minus_placebo']) if 'minus_placebo' in figures else '-'} "
            f"| {figures['training_reward']:.3f} | {figures['steps']} ({figures['missing_steps']}) "
            f"| {'-' if share is None else f'{share:.2f}'} |"
        )
    for arm, figures in result["arms"].items():
        if figures["confusion"]:
            lines.append(f"\n{arm} scores against the oracle: {figures['confusion']}; reports {figures['reports']}")
    if result["multi_turn"]:
        lines.append(f"\nmulti-turn: {result['multi_turn']}")
    lines.append(f"\n{result['seconds']} s")
    return "\n".join(lines)


def main() -> None:
    labelled = {said: read_words(said) for said in (RIGHT, WRONG, JUDGED_RIGHT, JUDGED_WRONG)}
    if any(labelled[said] is None for said in (RIGHT, WRONG)) or any(labelled[s] for s in (JUDGED_RIGHT, JUDGED_WRONG)):
        raise SystemExit(f"the arms' words no longer read as planned by the words rules: {labelled}")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--arms", default=",".join(ARMS), help=f"some of {', '.join(ARMS)}")
    parser.add_argument("--out", type=Path, required=True, help="a folder: result.json and table.md")
    parser.add_argument("--quick", action="store_true", help="one seed, a few rollouts: a smoke run of a few minutes")
    parser.add_argument("--learning-rate", help="the LoRA adapter's learning rate")
    parser.add_argument("--no-multi-turn", action="store_true", help="skip the multi-turn variant")
    options = parser.parse_args()
    arms = [arm.strip() for arm in options.arms.split(",") if arm.strip()]
    if unknown := sorted(set(arms) - set(ARMS)):
        parser.error(f"unknown arms {', '.join(unknown)}: choose among {', '.join(ARMS)}")
    plan = QUICK if options.quick else Plan()
    if options.learning_rate:
        plan = Plan(**{**asdict(plan), "learning_rate": options.learning_rate})
    seeds = range(options.first_seed, options.first_seed + (1 if options.quick else options.seeds))
    options.out.mkdir(parents=True, exist_ok=True)
    log_file = (options.out / "log.txt").open("a")

    def log(line: str) -> None:
        stamped = f"{time.strftime('%H:%M:%S')} {line}"
        print(stamped, flush=True)
        log_file.write(stamped + "\n")
        log_file.flush()

    load_before = os.getloadavg()
    log(f"load {load_before}; plan {plan}; arms {arms}; seeds {list(seeds)}")
    began = time.perf_counter()
    results: list[ArmResult] = []
    multi = None
    judge, judge_url = judge_process()
    try:
        # The judge's rankings of a retry's answers (source `judge`) do not count: the rules arm uses no judge.
        settings = {"reports.next-turn": "on", "reports.judge-url": judge_url,
                    "reports.judge-calls-per-minute": "100000", "reports.sources": NOT_RANKED}  # fmt: skip
        with daemon(plan, settings, options.out) as reef:
            log(f"daemon up ({time.perf_counter() - began:.0f} s)")
            for seed in seeds:
                results += run_seed(reef, arms, seed, plan, log)
            if not options.no_multi_turn:
                multi = multi_turn(reef, plan)
                log(f"multi-turn: {multi}")
    finally:
        judge.terminate()
        judge.wait()
    result = summary(results, multi, time.perf_counter() - began, plan)
    result["load"] = {"before": load_before, "after": os.getloadavg()}  # 1, 5 and 15 minutes
    (options.out / "result.json").write_text(json.dumps(result, indent=2))
    (options.out / "table.md").write_text(table(result) + "\n")
    log("\n" + table(result))


def _rate(scores: Scores) -> float:
    return _mean([score for per_question in scores for score in per_question])


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _merged(counts: list[dict[str, int]]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for each in counts:
        for key, value in each.items():
            merged[key] = merged.get(key, 0) + value
    return merged


def _estimate(estimate: Estimate) -> dict[str, float]:
    return {"value": round(estimate.value, 4), "low": round(estimate.low, 4), "high": round(estimate.high, 4)}


def _text(estimate: dict[str, float]) -> str:
    return Estimate(estimate["value"], estimate["low"], estimate["high"]).text()


if __name__ == "__main__":
    main()
