"""The agent proposer: the served model, as a coding agent (pi by default, or any adapter's agent with a headless
mode), edits the served harness laid out as files, checks and tries what it changed, and stops; the workspace is
then read back as mutations, admitted and reviewed like the text proposer's answer.

The agent runs in the trial jail (`reef_daemon/harness/jail.py`): no network, the files read-only but its root
(and there reef's own entries and its tool commands stay read-only), the person's home and reef's state hidden,
the model only through the socket, which relays model calls of `reef-trials` under a token lent for this run (the
relay presents it; the agent never holds it) and refuses them past the run's budget. Its tools (`harness-check`,
`harness-trial`, `harness-notes`) are commands that ask the daemon through the same socket with a step token
minted for this run; the daemon runs them (`step_tools.py`), each trial in a fresh jail of its own, and counts
trials, model calls and time itself, so no code in the jail can get past a bound. What they did is followed into
the request's progress while it runs. With `harness.sandbox = none` the agent runs as a plain child, the model
and its tools behind a loopback relay. At the wall bound the agent and everything it started are stopped, and the
workspace holds the proposal.
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters import SESSION_ENV, Adapter, Binding, find_agent, get_adapter, not_found
from recipes.reefine import agent_tools
from recipes.reefine.agent_run import AgentRun, Bounds, Choice, Note, remove
from recipes.reefine.agent_trial import NO_TOKEN, TrialAgent, run_trial
from recipes.reefine.answers import Answer
from recipes.reefine.behaviour import plan_check
from recipes.reefine.guide import agent_prompt, guide
from recipes.reefine.model import ServedModel
from recipes.reefine.proposer import Declined, Proposal, review_answer
from recipes.reefine.step_tools import StartTrial, StepTools
from recipes.reefine.workspace import CHECK, lay_out, read_back
from reef_contract import TOKEN_ENV, TRIAL_SCENARIO
from reef_daemon.recipe_api import (
    BWRAP,
    NO_BWRAP,
    Budget,
    RecipeContext,
    Refused,
    TokenLender,
    admit,
    bound_files,
    jail_argv,
    model_endpoint,
    needed_paths,
)
from reef_harness import Entry

OFF = "off"
PROBE_TIMEOUT_S = 20


class AgentProposer:
    """Agent proposer runs for the scenario's adapter. `agent` names the proposing agent's adapter; `sandbox` is
    bwrap or none; `hidden` are paths the jail hides besides the home; `trial_binary` finds the scenario's agent."""

    def __init__(
        self,
        adapter: Adapter,
        agent: str,
        sandbox: str,
        bounds: Bounds,
        hidden: list[Path],
        trial_binary: Callable[[], str | None],
    ) -> None:
        self._adapter = adapter
        self._agent = agent
        self._sandbox = sandbox
        self.bounds = bounds
        self._hidden = hidden
        self._trial_binary = trial_binary
        self._url: str | None = None
        self._gate: TokenLender | None = None
        self._jail_problem: str | None = None
        self._jail_probed = False

    def listening(self, context: RecipeContext) -> None:
        """The daemon listens: trial runs reach it at `context.url`, with tokens `context.gate` lends."""
        self._url = context.url
        self._gate = context.gate

    async def choose(self) -> Choice:
        """The agent proposer where its agent is installed here and the jail starts; why not, otherwise."""
        if self._agent == OFF:
            return Choice(None, None, False, "the agent proposer is off (harness.proposer-agent = off)")
        try:
            adapter = get_adapter(self._agent)
        except ValueError as exc:
            return Choice(None, None, False, f"harness.proposer-agent: {exc}")
        binary = find_agent(adapter.binary)  # where set-up puts it too, as the trial and the wrappers look
        if binary is None:
            return Choice(None, None, False, not_found(adapter.binary, adapter.agent.package))
        if self._url is None or self._gate is None:
            return Choice(None, None, False, "the daemon is not listening yet, so the agent would have no model")
        if self._sandbox != BWRAP:
            return Choice(adapter, binary, False, "")
        problem = await self._probe_jail()
        if problem is not None:
            return Choice(None, None, False, problem)
        return Choice(adapter, binary, True, "")

    def describe(self) -> str:
        """One line for `reef status`."""
        if self._agent == OFF:
            return "the text proposer (harness.proposer-agent = off)"
        where = "in a bubblewrap jail" if self._sandbox == BWRAP else "WITHOUT a jail (harness.sandbox = none)"
        return f"{self._agent}, {where}, where installed (else the text proposer); {self.bounds.describe()}"

    async def _probe_jail(self) -> str | None:
        """Why the jail does not start on this host, or None; asked once."""
        if self._jail_probed:
            return self._jail_problem
        bwrap = shutil.which(BWRAP)
        if bwrap is None:
            self._jail_problem = NO_BWRAP
        else:
            argv = [bwrap, "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev"]
            argv += ["--proc", "/proc", "true"]
            probe = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
            )
            try:
                _, stderr = await asyncio.wait_for(probe.communicate(), PROBE_TIMEOUT_S)
            except TimeoutError:
                probe.kill()
                stderr = b"it did not finish"
            if probe.returncode != 0:
                said = stderr.decode("utf-8", "replace").strip().splitlines()
                self._jail_problem = f"the bubblewrap jail does not start on this host: {said[-1] if said else ''}"
        self._jail_probed = True
        return self._jail_problem

    async def run(
        self,
        choice: Choice,
        request_id: str,
        request: str,
        tree: list[Entry],
        conversations: list[str],
        model: ServedModel,
        note: Note,
    ) -> Proposal | Declined:
        """One run of the agent on the request; the proposal is what its workspace holds when it stops."""
        assert choice.adapter is not None and choice.binary is not None
        assert self._url is not None and self._gate is not None
        root = Path(tempfile.mkdtemp(prefix="reef-proposer-"))
        run = AgentRun(root, choice, self.bounds, note)
        try:
            lay_out(
                run.workspace,
                tree,
                self._adapter,
                request,
                conversations,
                guide(self._adapter, self.bounds.describe(), str(run.bin)),
            )
            budget = Budget(self.bounds.model_calls)
            with self._gate.lend(TRIAL_SCENARIO) as token:
                tools = self._tools(run, tree, model.model, request_id, token, budget)
                async with model_endpoint(
                    root, self._url, TRIAL_SCENARIO, choice.jailed, budget, routes=tools.routes(), token=token
                ) as url:
                    run.write_tools()
                    binding = Binding(url, TRIAL_SCENARIO, model.model, f"proposer-for-{request_id}")
                    argv, env = self._command(run, binding, request, tools.token)
                    stopped = await run.follow(argv, env, tools)
            evidence = run.evidence(stopped, budget.used, tools)
            await note(
                f"agent stopped after {evidence['seconds']:g} s ({stopped}): {budget.used} model call(s), "
                f"{len(evidence['trials'])} trial(s)"
            )
            return await self._read(run, tree, request, model, evidence, note)
        finally:
            await asyncio.to_thread(remove, root)

    def _tools(
        self, run: AgentRun, tree: list[Entry], model: str, request_id: str, token: str | None, budget: Budget
    ) -> StepTools:
        """The run's step tools; its trials start the scenario's agent in a jail of their own where the agent has
        one, their model calls counted against the run's `budget`."""
        assert self._url is not None
        binary = self._trial_binary()
        start: StartTrial | None = None
        if binary is not None:
            bwrap = (shutil.which(BWRAP) or BWRAP) if run.choice.jailed else None
            label = f"trial-for-{request_id}"
            agent = TrialAgent(self._adapter, binary, bwrap, self._hidden, self._url, model, label, token, budget)
            start = functools.partial(run_trial, agent)

        no_trial = f"{self._adapter.binary} is not installed on this host ({self._adapter.agent.package})"
        limits = (self.bounds.trials, self.bounds.trial_s, run.deadline)
        return StepTools(self._adapter, tree, run.workspace, limits, start, no_trial, secrets.token_urlsafe(32))

    def _command(
        self, run: AgentRun, binding: Binding, request: str, step_token: str
    ) -> tuple[list[str], dict[str, str]]:
        """The agent's argv and environment, wrapped in the jail where there is one. It holds no daemon token: its
        relay presents the one lent for this run."""
        adapter, binary = run.choice.adapter, run.choice.binary
        assert adapter is not None and binary is not None
        home = run.root / "agent"
        for relative, text in bound_files(adapter, [], binding).items():
            target = home / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        agent = adapter.agent
        bins = [str(run.bin), str(Path(binary).parent)]
        env = {
            "PATH": os.pathsep.join([*bins, os.environ.get("PATH", os.defpath)]),
            "HOME": str(run.root / "home"),
            "TMPDIR": str(run.root / "tmp"),
            "LANG": "C.UTF-8",
            TOKEN_ENV: NO_TOKEN,
            SESSION_ENV: uuid.uuid4().hex,
            agent_tools.STEP_URL_ENV: binding.url,
            agent_tools.STEP_TOKEN_ENV: step_token,
            **agent.env(home, binding),
            **agent.offline_env,
        }
        headless = agent.headless(agent_prompt(request))
        headless[1:1] = PROPOSER_FLAGS.get(adapter.name, [])
        argv = [binary, *agent.args(home, headless)]
        if not run.choice.jailed:
            return argv, env
        bwrap = shutil.which(BWRAP) or BWRAP
        readonly = [run.bin, run.workspace / "reserved"]
        hidden = [Path.home(), *self._hidden]
        return jail_argv(bwrap, run.root, hidden, needed_paths(binary), env, argv, readonly), {
            "PATH": env["PATH"],
            "LANG": env["LANG"],
        }

    async def _read(
        self, run: AgentRun, tree: list[Entry], request: str, model: ServedModel, evidence: dict[str, Any], note: Note
    ) -> Proposal | Declined:
        back = read_back(run.workspace, tree, self._adapter)
        evidence["reported"] = back.reported
        for line in back.reported:
            await note(f"not applied: {line}")
        if run.stopped_at_bound and not back.mutations:
            return Declined("skipped", "the agent was stopped at the wall bound before it changed any entry", 1,
                            back.design or None, evidence=evidence)  # fmt: skip
        if not back.mutations:
            return Declined("skipped", "the agent changed no entry", 1, back.design or None, evidence=evidence)
        design = back.design or "The agent wrote no design.\n\nHow to use: see the changed entries."
        try:
            candidate = admit(tree, back.mutations, self._adapter)
        except Refused as exc:
            await note("admission refused the workspace: " + " ".join(exc.reasons))
            reason = "admission refused what the agent left in its workspace: " + " ".join(exc.reasons)
            return Declined("rejected", reason, 1, design, exc.reasons, evidence=evidence)
        answer = Answer(design, back.mutations, back.requires)
        review = await review_answer(model, request, answer, note)
        if not review.delivers:
            findings = review.uncovered or ["the review found that the entries do not deliver the request"]
            await note("the review found gaps: " + " ".join(findings))
            reason = "the review found that the agent's change does not deliver the request: " + " ".join(findings)
            return Declined("rejected", reason, 1, design, findings, evidence=evidence)
        await note("the review says the entries deliver the request")
        review_json = {"covered": review.covered, "uncovered": review.uncovered}
        checked = await asyncio.to_thread(plan_check, back.check, CHECK)
        if checked.problem is not None:
            await note(f"no usable behaviour check: {checked.problem}")
        return Proposal(
            design, back.mutations, candidate, back.requires, review_json, 1, evidence=evidence, checked=checked
        )


# What a proposing agent needs after the first word of its headless mode to run commands and edit files without
# asking: its own sandbox off, since it runs in reef's jail.
PROPOSER_FLAGS: dict[str, list[str]] = {"codex": ["--dangerously-bypass-approvals-and-sandbox"]}
