"""What one reefine step does with its unit: propose, admit, check, publish; and keep the request's progress."""

from __future__ import annotations

import json
from typing import Any

from recipes.reefine.agent_proposer import AgentProposer
from recipes.reefine.conversations import low_scored
from recipes.reefine.gate import Gate, Gated, not_evaluated
from recipes.reefine.model import ModelFailed, ServedModel
from recipes.reefine.proposer import Declined, Proposal, propose_for_request, propose_from_failures
from recipes.reefine.trial import TrialRunner, not_run
from reef_contract import PERSON_SOURCE, StoredRecord
from reef_daemon.recipe_api import HarnessHost, RequestProgress, Runtime, StepOutcome, Unit
from reef_harness import Entry, touches_kind

DESIGN_LIMIT = 4000
TRACE_LIMIT = 4000
REVIEW_KIND = "extension"  # changes that run code in the agent's process wait for a person's promote


class HarnessSteps:
    def __init__(
        self,
        harness: HarnessHost,
        progress: RequestProgress,
        runtime: Runtime,
        model: str,
        max_tokens: int,
        trial: TrialRunner,
        agent: AgentProposer,
        gate: Gate,
    ) -> None:
        self._harness = harness
        self._progress = progress
        self._runtime = runtime
        self._model = model
        self._max_tokens = max_tokens
        self._trial = trial
        self._agent = agent
        self._gate = gate

    async def for_request(self, scenario: str, unit: Unit) -> StepOutcome:
        """One change request, start to end. Its progress is durable; the committed step settles it."""
        request_id = unit.id
        text = unit.record.get("text", "")
        await self._progress.begin(request_id, scenario)

        async def note(line: str) -> None:
            await self._progress.note(request_id, line)

        served = await self._harness.served(scenario)
        tree = await self._harness.tree(scenario, served.release_id)
        model = ServedModel(self._runtime, self._model, self._max_tokens)
        choice = await self._agent.choose()
        await note(f"proposer: {choice.describe()}")
        try:
            if choice.adapter is not None:
                conversations = await low_scored(self._harness.store, scenario)
                proposal = await self._agent.run(choice, request_id, text, tree, conversations, model, note)
            else:
                proposal = await propose_for_request(model, text, tree, self._harness.adapter, note)
        except ModelFailed as exc:
            proposal = Declined("skipped", str(exc), 0)
        if proposal.design:
            phase = "evaluating" if isinstance(proposal, Proposal) else None
            await self._progress.note(request_id, "design written", state=phase, design=proposal.design)
        manifest = {
            "operation": "training",
            "request": {"id": request_id, "text": text},
            "summary": text.splitlines()[0][:120] if text.strip() else "change request",
        }
        outcome = await self._settle(scenario, served.release_id, tree, proposal, model, manifest, note)
        metrics = outcome.metrics
        metrics["proposer"] = choice.describe()
        await self._progress.finish(
            request_id,
            {
                "result": outcome.result,
                "reason": metrics.get("reason"),
                "release_id": outcome.release_id,
                "how_to_use": metrics.get("how_to_use"),
                "evidence": metrics.get("evidence"),
            },
            f"decided: {outcome.result}" + (f" ({metrics['reason']})" if metrics.get("reason") else ""),
        )
        return StepOutcome(outcome.result, metrics, outcome.release_id, served.release_id, request_id)

    async def from_failure(self, scenario: str, unit: Unit) -> StepOutcome:
        """A low-scored report: one skill from the conversations it scored."""
        served = await self._harness.served(scenario)
        tree = await self._harness.tree(scenario, served.release_id)
        referenced = [row for row in unit.referenced if row["type"] == "inference"]
        traces = [{"score": str(unit.record["score"]), "text": _trace(row)} for row in referenced]
        model = ServedModel(self._runtime, self._model, self._max_tokens)

        async def note(line: str) -> None:
            return None  # a failure-driven step has no request page; its metrics carry the outcome

        try:
            proposal = await propose_from_failures(model, traces, tree, self._harness.adapter, note)
        except ModelFailed as exc:
            proposal = Declined("skipped", str(exc), 0)
        manifest = {"operation": "training", "request": None, "summary": "a skill from low-scored conversations"}
        source = unit.record.get("source") or PERSON_SOURCE
        derived = None if source == PERSON_SOURCE else source
        outcome = await self._settle(scenario, served.release_id, tree, proposal, model, manifest, note, derived)
        also = tuple(str(row["id"]) for row in referenced)
        return StepOutcome(outcome.result, outcome.metrics, outcome.release_id, served.release_id, also_consumed=also)

    async def _settle(
        self,
        scenario: str,
        parent: str,
        tree: list[Any],
        proposal: Proposal | Declined,
        model: ServedModel,
        manifest: dict[str, Any],
        note: Any,
        derived: str | None = None,
    ) -> StepOutcome:
        """Check and publish a proposal, or turn a declined one into a rejected/skipped outcome. `derived` is the
        source of the derived report that triggered it, if one did: then the gate needs evidence to publish."""
        metrics: dict[str, Any] = {**model.metrics(), "attempts": proposal.attempts}
        if proposal.evidence:
            metrics["agent"] = proposal.evidence
        design = proposal.design
        if design:
            metrics["design"] = design[:DESIGN_LIMIT]
            metrics["how_to_use"] = how_to_use(design)
        if isinstance(proposal, Declined):
            metrics["reason"] = proposal.reason
            if proposal.findings:
                metrics["findings"] = proposal.findings
            return StepOutcome(proposal.result, metrics)
        await note(f"checking the candidate: it renders for {self._harness.adapter.name}")
        pending = touches_kind(tree, proposal.mutations, REVIEW_KIND)
        gated = await self._evaluate(scenario, parent, tree, proposal, pending, note, derived)
        evidence = gated.evidence
        metrics["check"], refusal = await self._check(scenario, tree, proposal.candidate, pending, gated, note)
        metrics["evidence"] = evidence
        if refusal is not None:
            result, metrics["reason"] = refusal
            return StepOutcome(result, metrics)
        if not evidence["passed"]:
            metrics["reason"] = f"the evaluation gate rejected it: {evidence['reason']}"
            await note(f"gate: rejected: {evidence['reason']}")
            return StepOutcome("rejected", metrics)
        manifest = {
            **manifest,
            "evidence": evidence,
            "design": design,
            "requires": proposal.requires,
            "review": proposal.review,
            "mutations": [mutation.to_json() for mutation in proposal.mutations],
        }
        release_id = await self._harness.publish(scenario, proposal.candidate, parent, manifest)
        metrics.update(mutations=[mutation.to_json() for mutation in proposal.mutations], requires=proposal.requires)
        if pending:
            await note("published for review: it changes an extension, so it serves only after promote")
            return StepOutcome("pending", metrics, release_id)
        self._harness.remember_head(scenario, release_id)
        await note("published")
        return StepOutcome("selected", metrics, release_id)

    async def _evaluate(
        self,
        scenario: str,
        parent: str,
        served: list[Entry],
        proposal: Proposal,
        pending: bool,
        note: Any,
        derived: str | None,
    ) -> Gated:
        """The evaluation gate's evidence on the candidate; not evaluated where no agent can run it here."""
        if pending and not self._trial.jailed:
            reason = "not evaluated: it changes an extension, and there is no jail to run it in"
            return Gated(not_evaluated(reason, parent, derived))
        binary, _bwrap, why = self._trial.plan()
        if binary is None:
            return Gated(not_evaluated(f"not evaluated: {why}", parent, derived))
        judge = ServedModel(self._runtime, self._model, self._max_tokens)
        gated = await self._gate.evaluate(
            self._harness.store, scenario, parent, served, proposal.candidate, proposal.checked, judge, note, derived
        )
        evidence = gated.evidence
        await note(f"gate: {'passed' if evidence['passed'] else 'failed'}: {evidence['reason']}")
        return gated

    async def _check(
        self, scenario: str, served: list[Entry], candidate: list[Entry], pending: bool, gated: Gated, note: Any
    ) -> tuple[dict[str, Any], tuple[str, str] | None]:
        """The pre-publish check, and (result, reason) when it stops the candidate: the candidate rendered
        (admission did that); where the agent is installed here, a trial run (of an extension change only in the
        jail). Where the gate ran the agent on the candidate and it answered, that run stands in for the trial.
        A failed trial is tried on the served tree too (or the gate's answered run of it stands in): if that fails
        as well the set-up is broken, not the candidate, and the step is skipped; otherwise the candidate is
        rejected."""
        check: dict[str, Any] = {"renders": True}
        if pending and not self._trial.jailed:
            check["trial"] = not_run(
                "it changes an extension, and without a jail (harness.sandbox = none) model-written code runs only "
                "once a person promotes it"
            ).to_json()
            return check, None
        if gated.candidate is not None:
            check["trial"] = gated.candidate.to_json()
            await note(f"trial: {gated.candidate.reason}")
            return check, None
        binary, _bwrap, _why = self._trial.plan()
        if binary is not None:
            await note(f"trial: starting {binary} on the candidate with one offline health prompt")
        trial = await self._trial.run(candidate, self._model, f"candidate-for-{scenario}")
        check["trial"] = trial.to_json()
        await note(f"trial: {trial.reason}")
        if not trial.ran or trial.passed:
            return check, None
        served_trial = gated.served
        if served_trial is None:
            await note(
                "trial: starting it on the served harness the same way, to tell a broken candidate from a broken set-up"
            )
            served_trial = await self._trial.run(served, self._model, f"served-for-{scenario}")
        else:
            await note(f"trial: on the served harness: {served_trial.reason}")
        check["served_trial"] = served_trial.to_json()
        if served_trial.passed:
            return check, (
                "rejected",
                f"the candidate failed its trial run, the served harness did not: {trial.reason}",
            )
        return check, (
            "skipped",
            f"the trial could not judge the candidate: the served harness fails too ({served_trial.reason})",
        )


def how_to_use(design: str) -> str | None:
    """The design's last paragraph starting with "How to use", without the heading."""
    found = None
    for paragraph in design.split("\n\n"):
        stripped = paragraph.strip().lstrip("#* ").strip()
        if stripped.lower().startswith("how to use"):
            found = stripped[len("how to use") :].lstrip(":*# \n").strip() or None
    return found


def _trace(row: StoredRecord) -> str:
    shown = {"request": row["request"], "response": row["response"]}
    return json.dumps(shown, ensure_ascii=False)[:TRACE_LIMIT]
