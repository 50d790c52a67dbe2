// reef's own pi extension (reserved entry `reef-requests`): /reefine, /versions, /versions vN install, /good and
// /bad (the person's score on the session's last answer, by `reef-pi good|bad`), and a notice at session start when
// a newer version of this harness is served. Plain JavaScript, so node parses it too.
// It reaches reef with what `reef-pi` puts in the environment; started any other way, it says so and does nothing.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const POLL_MS = 1000;
const WAIT_MS = 30 * 60 * 1000;
const FETCH_MS = 10000;
const REQUEST_WIDTH = 60;

function session() {
  const env = process.env;
  if (!env.REEF_SERVICE_URL || !env.REEF_SCENARIO || !env.REEF_HARNESS_ROOT) return null;
  return {
    url: env.REEF_SERVICE_URL.replace(/\/+$/, ""),
    scenario: env.REEF_SCENARIO,
    token: env.REEF_TOKEN || "",
    root: env.REEF_HARNESS_ROOT,
    wrapper: env.REEF_HARNESS_WRAPPER || "",
    session: env.REEF_HARNESS_SESSION || "",
  };
}

function installedRelease(reef) {
  try {
    return JSON.parse(readFileSync(join(reef.root, ".reef-harness-release"), "utf8")).release_id || null;
  } catch {
    return null;
  }
}

async function call(reef, method, path, body) {
  const headers = { "x-reef-scenario": reef.scenario, "content-type": "application/json" };
  if (reef.token) headers.authorization = `Bearer ${reef.token}`;
  const response = await fetch(reef.url + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(FETCH_MS),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message = answer && answer.error ? answer.error.message : `reef answered HTTP ${response.status}`;
    throw new Error(message);
  }
  return answer;
}

// One line for the person: a notification with a UI, else stdout (print mode), so scripts see it too.
function say(ctx, text, level = "info") {
  if (ctx.hasUI) ctx.ui.notify(text, level);
  else process.stdout.write(`${text}\n`);
}

function notStarted(ctx) {
  say(ctx, "reef: this pi was not started with reef-pi, so /reefine and /versions cannot reach reef", "error");
}

async function releases(reef) {
  const answer = await call(reef, "GET", `/reef/scenarios/${encodeURIComponent(reef.scenario)}/releases`);
  return answer.releases || [];
}

function resultLine(progress) {
  const release = progress.release ? ` (release ${progress.release.slice(0, 8)})` : "";
  const version = progress.version ? `: ${progress.version}` : ""; // a skipped or rejected request made none
  const lines = [`reef: ${progress.result}${version}${release}`];
  if (progress.reason) lines.push(`why: ${progress.reason}`);
  if (progress.how_to_use && ["selected", "pending"].includes(progress.result)) {
    lines.push(`How to use: ${progress.how_to_use}`);
  }
  if (progress.result === "selected") lines.push(`install it with: /versions ${progress.version} install`);
  if (progress.result === "pending") lines.push("it changes an extension, so a person must promote it first");
  return lines.join("\n");
}

async function watch(reef, ctx, requestId) {
  const deadline = Date.now() + WAIT_MS;
  let shown = "";
  while (Date.now() < deadline) {
    const progress = await call(reef, "GET", `/reef/requests/${encodeURIComponent(requestId)}`);
    if (progress.state === "settled") {
      if (ctx.hasUI) ctx.ui.setStatus("reef", undefined);
      say(ctx, resultLine(progress), progress.result === "selected" ? "info" : "warning");
      return;
    }
    const latest = progress.activity && progress.activity.length ? progress.activity.at(-1).text : "";
    const line = `reef: ${progress.state}: ${latest}`.slice(0, 160);
    if (line !== shown && ctx.hasUI) ctx.ui.setStatus("reef", line);
    shown = line;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  say(ctx, `reef: request ${requestId} is still running; reef requests ${requestId} --wait shows the rest`, "warning");
}

async function reefine(reef, text, ctx) {
  if (!text.trim()) {
    say(ctx, "reef: say what to change, e.g. /reefine add a /changelog command that drafts release notes", "error");
    return;
  }
  const body = { text: text.trim(), client: { agent: "pi" } };
  if (reef.session) body.session = reef.session;
  const installed = installedRelease(reef);
  if (installed) body.release_id = installed;
  const filed = await call(reef, "POST", "/reef/requests", body);
  say(ctx, `reef: request ${filed.agent_record_id} filed; reef's proposer is on it`);
  const watching = watch(reef, ctx, filed.agent_record_id).catch((error) => say(ctx, `reef: ${error.message}`, "error"));
  // In print mode the process ends with the prompt, so wait here; with a UI the session goes on meanwhile.
  if (!ctx.hasUI) await watching;
}

function table(rows, installed) {
  // The columns and words of `reef versions` and `reef-pi versions`.
  const lines = [["version", "release", "operation", "result", "status"]];
  const notes = [];
  for (const row of [...rows].reverse()) {
    const status = [];
    if (row.release_id && row.release_id === installed) status.push("installed");
    if (row.current) status.push("current");
    if (row.pending) status.push("pending");
    if (row.promoted_as) status.push(`promoted as ${row.promoted_as}`);
    const version = row.version || "-"; // a skipped or rejected step has no version
    lines.push([version, (row.release_id || "").slice(0, 8) || "-", row.operation, row.result, status.join(", ")]);
    const request = row.request && row.request.text ? row.request.text : "";
    notes.push(request.length > REQUEST_WIDTH ? `${request.slice(0, REQUEST_WIDTH - 1)}…` : request);
  }
  const widths = lines[0].map((_, column) => Math.max(...lines.map((line) => line[column].length)));
  const out = [];
  lines.forEach((line, index) => {
    out.push(line.map((cell, column) => cell.padEnd(widths[column])).join("  ").trimEnd());
    if (index > 0 && notes[index - 1]) out.push(`    ${notes[index - 1]}`);
  });
  return out.join("\n");
}

function touchesExtension(row) {
  const mutations = (row.metrics && row.metrics.mutations) || [];
  return row.pending || mutations.some((mutation) => mutation.kind === "extension");
}

async function install(reef, version, ctx, pi) {
  const row = (await releases(reef)).find((candidate) => candidate.version === version);
  if (!row) {
    say(ctx, `reef: there is no ${version}; /versions lists them`, "error");
    return;
  }
  if (!row.release_id || ["rejected", "skipped"].includes(row.result)) {
    say(ctx, `reef: ${version} was ${row.result}, so there is nothing to install`, "error");
    return;
  }
  const warning = touchesExtension(row)
    ? "\nIt changes a pi extension: extensions run inside pi with your permissions. Install only if you trust it."
    : "";
  // With a UI the person confirms here; in print mode the typed command is the confirmation.
  if (ctx.hasUI && !(await ctx.ui.confirm(`Install ${version}?`, `This replaces the installed harness.${warning}`))) {
    say(ctx, "reef: not installed");
    return;
  }
  if (!ctx.hasUI && warning) say(ctx, `reef: ${warning.trim()}`, "warning");
  if (!reef.wrapper) {
    say(ctx, "reef: REEF_HARNESS_WRAPPER is unset; run reef-pi update --release " + version, "error");
    return;
  }
  const result = await pi.exec(reef.wrapper, ["update", "--release", version], { timeout: 120000 });
  if (result.code !== 0) {
    say(ctx, `reef: installing ${version} failed: ${(result.stderr || result.stdout).trim()}`, "error");
    return;
  }
  say(ctx, `reef: installed ${version} (release ${row.release_id.slice(0, 8)}). Type /reload to load it now.`);
}

async function versions(reef, args, ctx, pi) {
  const words = args.trim().split(/\s+/).filter(Boolean);
  if (words.length === 2 && words[1] === "install" && /^v\d+$/.test(words[0])) {
    await install(reef, words[0], ctx, pi);
    return;
  }
  if (words.length) {
    say(ctx, "reef: use /versions, or /versions vN install", "error");
    return;
  }
  say(ctx, table(await releases(reef), installedRelease(reef)));
}

async function notice(reef, ctx) {
  const rows = await releases(reef);
  const current = rows.find((row) => row.current);
  const installed = installedRelease(reef);
  if (!current || !installed || current.release_id === installed) return;
  const text = `reef: ${current.version} of this harness is served; /versions ${current.version} install installs it`;
  if (ctx.hasUI) ctx.ui.notify(text, "info");
  else process.stderr.write(`${text}\n`);
}

// /good and /bad: `reef-pi good|bad [words]` scores the session's last answer; its line is what the person sees.
function thumb(reef, verdict, words, ctx) {
  if (!reef.wrapper) return notStarted(ctx);
  const args = words.trim() ? [verdict, words.trim()] : [verdict];
  return new Promise((resolve) => {
    execFile(reef.wrapper, args, { timeout: FETCH_MS, env: process.env }, (error, stdout, stderr) => {
      const said = `${stdout || ""}${stderr || ""}`.trim();
      say(ctx, said || (error ? `reef: ${error.message}` : "reef: scored"), error ? "error" : "info");
      resolve();
    });
  });
}

function guarded(handler) {
  return async (args, ctx) => {
    const reef = session();
    if (!reef) return notStarted(ctx);
    try {
      await handler(reef, args || "", ctx);
    } catch (error) {
      say(ctx, `reef: ${error.message}`, "error");
    }
  };
}

export default function (pi) {
  pi.registerCommand("reefine", {
    description: "Ask reef to change this harness: /reefine <what to change>",
    handler: guarded((reef, args, ctx) => reefine(reef, args, ctx)),
  });
  pi.registerCommand("versions", {
    description: "This harness's versions; /versions vN install installs one",
    handler: guarded((reef, args, ctx) => versions(reef, args, ctx, pi)),
  });
  for (const verdict of ["good", "bad"]) {
    pi.registerCommand(verdict, {
      description: `Score this session's last answer ${verdict}: /${verdict} [what was ${verdict} about it]`,
      handler: guarded((reef, args, ctx) => thumb(reef, verdict, args, ctx)),
    });
  }
  pi.on("session_start", async (_event, ctx) => {
    const reef = session();
    if (!reef) return;
    await notice(reef, ctx).catch(() => undefined); // reef unreachable: the first model call will say so
  });
}
