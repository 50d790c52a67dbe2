"""`reef versions --save`: a version's release files written into the folder given, and nothing written when the
daemon names a file that is not a plain name of that folder (the CLI does not trust the answer with paths)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from typer.testing import CliRunner

from reef_cli.app import app
from tests.support.cli_testing import ModelThread

RELEASE = "a" * 40


def stub_daemon(files: dict[str, bytes]) -> web.Application:
    """A daemon with one scenario, `toy`, whose v1 has these release files."""

    async def status(_request: web.Request) -> web.Response:
        return web.json_response({"scenarios": {"toy": {}}})

    async def releases(_request: web.Request) -> web.Response:
        row = {"version": "v1", "release_id": RELEASE, "step": 1, "decision": "selected"}
        return web.json_response({"scenario": "toy", "releases": [row]})

    async def release_files(request: web.Request) -> web.Response:
        assert request.match_info["release_id"] == RELEASE
        encoded = {name: base64.b64encode(content).decode("ascii") for name, content in files.items()}
        return web.json_response({"scenario": "toy", "release_id": RELEASE, "files": encoded})

    stub = web.Application()
    stub.router.add_get("/reef/status", status)
    stub.router.add_get("/reef/scenarios/toy/releases", releases)
    stub.router.add_get("/reef/scenarios/toy/releases/{release_id}/files", release_files)
    return stub


@pytest.fixture
def serve() -> Iterator[list[ModelThread]]:
    served: list[ModelThread] = []
    yield served
    for thread in served:
        thread.stop()


def save(serve: list[ModelThread], files: dict[str, bytes], folder: Path, *more: str) -> tuple[int, str]:
    thread = ModelThread(stub_daemon(files))
    serve.append(thread)
    url = thread.start()
    arguments = ["versions", "--scenario", "toy", "v1", "--save", str(folder), "--url", url, *more]
    result = CliRunner().invoke(app, arguments)
    return result.exit_code, result.output


def test_a_versions_files_are_saved_into_the_folder(serve: list[ModelThread], tmp_path: Path) -> None:
    files = {"adapter_config.json": b'{"r": 8}', "adapter_model.safetensors": b"tensors"}
    code, output = save(serve, files, tmp_path / "adapter")
    assert code == 0, output
    assert "saved v1 of toy" in output
    assert {path.name: path.read_bytes() for path in (tmp_path / "adapter").iterdir()} == files


def test_with_json_the_save_is_one_line_naming_the_version_folder_and_files(
    serve: list[ModelThread], tmp_path: Path
) -> None:
    files = {"adapter_config.json": b'{"r": 8}', "adapter_model.safetensors": b"tensors"}
    code, output = save(serve, files, tmp_path / "adapter", "--json")
    assert code == 0, output
    assert json.loads(output) == {
        "scenario": "toy",
        "version": "v1",
        "release_id": RELEASE,
        "folder": str(tmp_path / "adapter"),
        "files": sorted(files),
    }


def test_a_file_name_that_leaves_the_folder_saves_nothing(serve: list[ModelThread], tmp_path: Path) -> None:
    files = {"adapter_config.json": b"{}", "../outside.txt": b"escaped"}
    code, output = save(serve, files, tmp_path / "adapter")
    assert code == 1
    assert "../outside.txt" in output and "not plain file names" in output
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "adapter").exists()
