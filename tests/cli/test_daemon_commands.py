"""`reef start`, `reef status`, `reef stop` as real processes; finding the daemon; the one-line failures."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from aiohttp import web
from typer.testing import CliRunner

from reef_cli.app import app
from reef_cli.discovery import DEFAULT_URL, find_daemon
from reef_cli.state import process_alive
from tests.support.cli_testing import REEF, ModelThread, clean_env, run_reef, start_daemon
from tests.support.waiting import eventually_sync


def test_start_status_stop(tmp_path: Path, upstream_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    daemon = start_daemon(tmp_path, upstream_url)
    try:
        state = tmp_path / ".reef"
        pid = int((state / "daemon.pid").read_text())
        port = int(daemon.url.rsplit(":", 1)[1])
        assert daemon.url == f"http://127.0.0.1:{port}" == (state / "daemon.url").read_text().strip()
        assert (state / "daemon.log").read_text().count("listening on") == 1
        assert process_alive(pid)

        again = daemon.reef("start", "--inference.upstream-url", upstream_url, "--reef.port", "0")
        assert again.returncode == 0
        assert "already running" in again.stdout and daemon.url in again.stdout

        served_here = daemon.reef("serve", "--inference.upstream-url", upstream_url, "--reef.port", "0")
        assert served_here.returncode == 1
        assert f"reef is already running from .reef at {daemon.url} (pid {pid})" in served_here.stderr

        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        taken = run_reef(
            elsewhere, clean_env(), "start", "--inference.upstream-url", upstream_url, "--reef.port", str(port)
        )
        assert taken.returncode == 1
        assert taken.stderr.startswith("reef: did not start: something already answers"), taken.stderr
        assert "Traceback" not in taken.stderr
        assert not (elsewhere / ".reef" / "daemon.pid").exists()

        daemon.chat("alpha")
        daemon.chat("alpha")
        # In-process, from the daemon's directory and with no REEF_URL: the daemon is found through .reef/.
        monkeypatch.chdir(tmp_path)
        status = CliRunner().invoke(app, ["status", "--json"], env={"REEF_URL": None, "REEF_TOKEN": None})
        assert status.exit_code == 0, status.output
        body = json.loads(status.stdout)
        assert body["recipe"]["name"] == "record"
        assert body["runtime"]["kind"] == "http"
        assert body["scenarios"]["alpha"]["records"] == 2

        table = daemon.reef("status")
        assert table.returncode == 0, table.stderr
        for shown in ("recipe", "record", "runtime", "uptime", "training", "alpha"):
            assert shown in table.stdout
    finally:
        daemon.stop()
    eventually_sync(lambda: not process_alive(pid), 60, "the daemon to exit")
    assert not (tmp_path / ".reef" / "daemon.pid").exists()
    assert "reef: stopped" in (tmp_path / ".reef" / "daemon.log").read_text()

    down = daemon.reef("status")
    assert down.returncode == 1
    assert down.stderr.count("\n") == 1 and "reef start" in down.stderr and "Traceback" not in down.stderr
    stopped_again = daemon.reef("stop")
    assert stopped_again.returncode == 0 and "not running" in stopped_again.stdout


def test_start_on_a_port_another_web_server_holds_is_one_line_naming_the_port(tmp_path: Path) -> None:
    other = ModelThread(web.Application())  # answers every path, /healthz included, with 404
    try:
        port = other.start().rsplit(":", 1)[1]
        taken = run_reef(tmp_path, clean_env(), "start", "--reef.port", port, "--inference.upstream-url", other.url)
    finally:
        other.stop()
    assert taken.returncode == 1
    assert taken.stderr.count("\n") == 1 and "Traceback" not in taken.stderr, taken.stderr
    assert f"something already answers at http://127.0.0.1:{port}" in taken.stderr and "--reef.port" in taken.stderr


def test_start_refuses_bad_settings_with_usage_status(tmp_path: Path) -> None:
    result = run_reef(tmp_path, clean_env(), "start", "--reef.prot", "1")
    assert result.returncode == 2
    assert "unknown setting" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / ".reef" / "daemon.pid").exists()


def test_a_daemon_with_a_token_says_to_set_reef_token(tmp_path: Path, upstream_url: str) -> None:
    daemon = start_daemon(tmp_path, upstream_url, env=clean_env(REEF_TOKEN="s3cret-token"))
    try:
        without = run_reef(tmp_path, clean_env(), "records")
        assert without.returncode == 1
        assert "REEF_TOKEN" in without.stderr and without.stderr.count("\n") == 1
        assert "Traceback" not in without.stderr
        wrong = run_reef(tmp_path, clean_env(), "records", "--token", "nope")
        assert wrong.returncode == 1 and "refused the token" in wrong.stderr
        right = run_reef(tmp_path, clean_env(REEF_TOKEN="s3cret-token"), "records", "--json")
        assert right.returncode == 0, right.stderr
    finally:
        daemon.stop()


def test_the_daemon_is_found_in_the_documented_order(tmp_path: Path) -> None:
    state = tmp_path / ".reef"
    assert find_daemon(environ={}, state_dir=state).url == DEFAULT_URL
    state.mkdir()
    (state / "daemon.url").write_text("http://127.0.0.1:9911\n")
    assert find_daemon(environ={}, state_dir=state).url == DEFAULT_URL  # its daemon is gone
    (state / "daemon.pid").write_text(f"{os.getpid()}\n")  # a running process
    assert find_daemon(environ={}, state_dir=state).url == "http://127.0.0.1:9911"
    from_env = find_daemon(environ={"REEF_URL": "http://127.0.0.1:9922/", "REEF_TOKEN": "t"}, state_dir=state)
    assert (from_env.url, from_env.token) == ("http://127.0.0.1:9922", "t")
    chosen = find_daemon("http://127.0.0.1:9933", "flag", environ={"REEF_URL": "http://x:1"}, state_dir=state)
    assert (chosen.url, chosen.token) == ("http://127.0.0.1:9933", "flag")


def test_an_unreachable_daemon_is_one_line_saying_how_to_start_it(tmp_path: Path) -> None:
    env = clean_env(REEF_URL="http://127.0.0.1:9")  # the discard port: nothing listens there
    for command in (["records"], ["show", "0" * 32], ["scenarios"], ["score", "0" * 32, "1"]):
        result = run_reef(tmp_path, env, *command)
        assert result.returncode == 1, command
        assert result.stderr.startswith("reef: no daemon answers at http://127.0.0.1:9"), result.stderr
        assert result.stderr.count("\n") == 1 and "reef start" in result.stderr


def test_a_url_without_scheme_is_taken_as_http_and_other_mistakes_are_named(tmp_path: Path) -> None:
    assert find_daemon("127.0.0.1:9933/", environ={}).url == "http://127.0.0.1:9933"
    assert find_daemon(environ={"REEF_URL": "localhost:9944"}).url == "http://localhost:9944"
    no_scheme = run_reef(tmp_path, clean_env(), "records", "--url", "127.0.0.1:9")
    assert no_scheme.stderr.startswith("reef: no daemon answers at http://127.0.0.1:9 (connection refused)")
    wrong = run_reef(tmp_path, clean_env(), "records", "--url", "ftp://127.0.0.1:9")
    assert wrong.returncode == 2 and "--url must be an http:// or https:// URL" in wrong.stderr
    unknown_host = run_reef(tmp_path, clean_env(REEF_URL="http://no-such-host.invalid:8900"), "records")
    assert unknown_host.returncode == 1 and "(the host name does not resolve:" in unknown_host.stderr


def test_stop_without_a_daemon_clears_a_stale_pid_file(tmp_path: Path) -> None:
    state = tmp_path / ".reef"
    state.mkdir()
    dead = os.getpid() + 100_000  # beyond any pid in use here
    (state / "daemon.pid").write_text(f"{dead}\n")
    result = run_reef(tmp_path, clean_env(), "stop")
    assert result.returncode == 0 and "not running" in result.stdout
    assert not (state / "daemon.pid").exists()


def test_a_recipe_profile_daemon_is_found_and_stopped_from_its_directory(tmp_path: Path, upstream_url: str) -> None:
    """`reef serve --recipe reefine` keeps state in .reef/reefine and listens on its own port; client commands and
    `reef stop` run in the same directory find it without --url."""
    serving = subprocess.Popen(
        [*REEF, "serve", "--recipe", "reefine", "--reef.port", "0", "--inference.upstream-url", upstream_url],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        state = tmp_path / ".reef" / "reefine"
        url = eventually_sync(
            lambda: (state / "daemon.url").exists() and (state / "daemon.url").read_text().strip(), 60, "a URL"
        )
        assert (state / "daemon.pid").read_text().strip() == str(serving.pid)
        status = run_reef(tmp_path, clean_env(), "status", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["recipe"]["name"] == "reefine"
        table = run_reef(tmp_path, clean_env(), "status")
        assert table.returncode == 0 and "trials" in table.stdout  # which agent a trial starts, or why none
        created = run_reef(tmp_path, clean_env(), "scenarios", "create", "my-harness")
        assert created.returncode == 0, created.stderr
        versions = run_reef(tmp_path, clean_env(), "versions", "--scenario", "my-harness", "--json")
        assert versions.returncode == 0, versions.stderr
        assert [row["version"] for row in json.loads(versions.stdout)["releases"]] == ["v0"]

        other = start_daemon(tmp_path, upstream_url)  # a second daemon here, state in .reef
        try:
            several = run_reef(tmp_path, clean_env(), "records")
            assert several.returncode == 1 and several.stderr.count("\n") == 1
            assert f"several daemons run from this directory: {other.url} (.reef), {url} (.reef/reefine)" in (
                several.stderr
            )
            assert "choose one with --url" in several.stderr
        finally:
            other.stop()

        stopped = run_reef(tmp_path, clean_env(), "stop")
        assert stopped.returncode == 0 and f"reef stopped (pid {serving.pid})" in stopped.stdout
        assert serving.wait(timeout=60) == 0
        assert not (state / "daemon.pid").exists() and not (state / "daemon.url").exists()
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.wait()
        assert serving.stdout is not None
        serving.stdout.close()


def test_two_recipes_start_status_and_stop_side_by_side_in_one_directory(tmp_path: Path, upstream_url: str) -> None:
    """`reef start --recipe R` beside a record daemon starts R's daemon in .reef/<R>; `reef status` shows both;
    `reef stop` stops both and names each."""
    record = start_daemon(tmp_path, upstream_url, port=0)
    recipe = "tests.daemon.sectioned_recipe:SparkleRecipe"
    beside = run_reef(tmp_path, clean_env(), "start", "--recipe", recipe, "--inference.upstream-url", upstream_url)
    try:
        assert beside.returncode == 0, beside.stdout + beside.stderr
        assert "already running" not in beside.stdout
        state = tmp_path / ".reef" / "sparkle"
        assert f"keeps its state in {Path('.reef') / 'sparkle'}" in beside.stdout
        sparkle_url = (state / "daemon.url").read_text().strip()
        assert sparkle_url != record.url and f"reef started at {sparkle_url}" in beside.stdout

        both = run_reef(tmp_path, clean_env(), "status", "--json")
        assert both.returncode == 0, both.stderr
        shown = {row["url"]: row["status"]["recipe"]["name"] for row in json.loads(both.stdout)["daemons"]}
        assert shown == {record.url: "record", sparkle_url: "sparkle"}
        table = run_reef(tmp_path, clean_env(), "status")
        assert table.returncode == 0 and record.url in table.stdout and sparkle_url in table.stdout

        record_pid, sparkle_pid = (int((folder / "daemon.pid").read_text()) for folder in (tmp_path / ".reef", state))
        stopped = run_reef(tmp_path, clean_env(), "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert f"reef stopped (pid {record_pid}, state in .reef)" in stopped.stdout
        assert f"reef stopped (pid {sparkle_pid}, state in {Path('.reef') / 'sparkle'})" in stopped.stdout
        eventually_sync(lambda: not process_alive(record_pid) and not process_alive(sparkle_pid), 60, "both to exit")
    finally:
        record.stop()
        run_reef(tmp_path, clean_env(), "stop", "--state-dir", str(tmp_path / ".reef" / "sparkle"))
