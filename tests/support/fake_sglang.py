"""A fake SGLang server for the `sglang` engine's tests: SGLang 0.5.15's native HTTP contract for the calls reef
makes, generating real tokens with the embedded model (SmolLM2-135M) in torch.

`/generate` takes `input_ids`, `sampling_params` (`max_new_tokens`, `temperature`, `top_p`, `sampling_seed`),
`return_logprob` and `stream`, and streams SSE events (cumulative, or only the new part when `incremental`) with
`output_ids` and `meta_info` (`completion_tokens`, `output_token_logprobs` as `[logprob, id, null]`,
`weight_version`, `finish_reason`). Generation stops at the model's end-of-turn ids (included in `output_ids`).
`/pause_generation` (`retract`: requests wait and re-read their context under the new weights; `abort`: they end),
`/continue_generation`, `/update_weights_from_disk` (`model_path`, `weight_version`; 400 `success: false` when the
folder cannot be loaded or `refuse_updates` is set; once loaded, `/model_info` reports that folder as its
`model_path`), `/model_info` and `/health` behave as SGLang's.

`log` keeps what happened in order: `("pause", mode)`, `("update", version, ok)`, `("continue",)` and
`("token", request, version)` for every token generated.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import torch
from aiohttp import web

from reef_daemon.runtimes.embedded.sampling import SamplingParams, new_generator, pick_token


class FakeSglang:
    def __init__(self, folder: Path, *, incremental: bool = False) -> None:
        from transformers import AutoModelForCausalLM

        self.model_path = folder
        self.model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
        self.model.eval()
        config_eos = self.model.generation_config.eos_token_id
        self.end_ids = set(config_eos if isinstance(config_eos, list) else [config_eos])
        self.incremental = incremental
        self.version = "default"
        self.refuse_updates: str | None = None
        self.log: list[tuple[Any, ...]] = []
        self.generate_bodies: list[dict[str, Any]] = []
        self.adapters: dict[str, Path] = {}  # LoRA adapters loaded, by name (--enable-lora)
        self._open = asyncio.Event()
        self._open.set()
        self._step = asyncio.Lock()  # held while a token is computed; a pause waits for it
        self._aborted: set[int] = set()
        self._running: set[int] = set()
        self._ids = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/generate", self.generate)
        app.router.add_post("/pause_generation", self.pause)
        app.router.add_post("/continue_generation", self.resume)
        app.router.add_post("/update_weights_from_disk", self.update)
        app.router.add_post("/load_lora_adapter", self.load_lora)
        app.router.add_post("/unload_lora_adapter", self.unload_lora)
        app.router.add_get("/model_info", self.model_info)
        app.router.add_get("/health", self.health)
        return app

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    def tokens(self) -> list[tuple[int, str]]:
        """(request, version) of every generated token, in generation order."""
        return [(entry[1], entry[2]) for entry in self.log if entry[0] == "token"]

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def model_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "model_path": str(self.model_path),
                "tokenizer_path": str(self.model_path),
                "is_generation": True,
                "weight_version": self.version,
            }
        )

    async def pause(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        mode = body.get("mode", "abort")
        self._open.clear()
        async with self._step:  # the token being computed finishes first
            self.log.append(("pause", mode))
            if mode == "abort":
                self._aborted |= self._running
        return web.json_response({"message": "Generation paused", "status": "ok"})

    async def resume(self, request: web.Request) -> web.Response:
        self.log.append(("continue",))
        self._open.set()
        return web.json_response({"message": "Generation continued", "status": "ok"})

    async def update(self, request: web.Request) -> web.Response:
        body = await request.json()
        version = str(body.get("weight_version") or self.version)
        async with self._step:
            try:
                if self.refuse_updates is not None:
                    raise ValueError(self.refuse_updates)
                state = await asyncio.to_thread(_read_folder, Path(body["model_path"]))
                await asyncio.to_thread(self.model.load_state_dict, state, strict=False)
            except (OSError, ValueError, KeyError, RuntimeError) as exc:
                self.log.append(("update", version, False))
                message = f"Failed to update weights: {exc}. Rolling back to the previous weights."
                return web.json_response({"success": False, "message": message, "num_paused_requests": 0}, status=400)
            self.version = version
            self.model_path = Path(body["model_path"])  # `/model_info` reports the folder loaded last, as SGLang's
            self.log.append(("update", version, True))
        return web.json_response(
            {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}
        )

    async def load_lora(self, request: web.Request) -> web.Response:
        body = await request.json()
        name, path = str(body["lora_name"]), Path(body["lora_path"])
        if name in self.adapters or not (path / "adapter_config.json").is_file():
            self.log.append(("load_lora", name, False))
            message = f"LoRA adapter {name} is already loaded" if name in self.adapters else f"no adapter at {path}"
            return web.json_response({"success": False, "error_message": message}, status=400)
        self.adapters[name] = path
        self.log.append(("load_lora", name, True))
        return web.json_response({"success": True, "loaded_adapters": {n: str(p) for n, p in self.adapters.items()}})

    async def unload_lora(self, request: web.Request) -> web.Response:
        name = str((await request.json())["lora_name"])
        self.log.append(("unload_lora", name, self.adapters.pop(name, None) is not None))
        return web.json_response({"success": True, "loaded_adapters": {n: str(p) for n, p in self.adapters.items()}})

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.generate_bodies.append(body)
        lora = body.get("lora_path")
        if lora is not None and lora not in self.adapters:
            return web.json_response({"error": {"message": f"LoRA adapter {lora} is not loaded"}}, status=400)
        ids = [int(token) for token in body["input_ids"]]
        sampling = body.get("sampling_params") or {}
        params = SamplingParams(
            max_tokens=int(sampling.get("max_new_tokens", 128)),
            temperature=float(sampling.get("temperature", 1.0)),
            top_p=float(sampling.get("top_p", 1.0)),
            seed=sampling.get("sampling_seed"),
        )
        rid = next(self._ids)
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        self._running.add(rid)
        try:
            await self._decode(rid, ids, params, response)
        except ConnectionResetError:
            pass  # the client left: SGLang aborts the request
        finally:
            self._running.discard(rid)
        return response

    async def _decode(self, rid: int, prompt: list[int], params: SamplingParams, response: web.StreamResponse) -> None:
        generator = new_generator(params.seed)
        output: list[int] = []
        logprobs: list[list[Any]] = []
        cache: Any = None
        cache_version: str | None = None
        sent = 0
        while True:
            await self._open.wait()
            async with self._step:
                if not self._open.is_set():
                    continue
                if rid in self._aborted:
                    await self._send(
                        response, rid, prompt, output, logprobs, sent, {"type": "abort", "message": "Abort"}
                    )
                    return
                version = self.version
                if cache is None or cache_version != version:  # retracted: re-read the context
                    from transformers import DynamicCache

                    cache, feed = DynamicCache(config=self.model.config), prompt + output
                else:
                    feed = output[-1:]
                token, logprob = await asyncio.to_thread(self._forward, feed, cache, params, generator)
                cache_version = version
                self.log.append(("token", rid, version))
            output.append(token)
            logprobs.append([logprob, token, None])
            finish: dict[str, Any] | None = None
            if token in self.end_ids:
                finish = {"type": "stop", "matched": token}
            elif len(output) >= params.max_tokens:
                finish = {"type": "length", "length": len(output)}
            await self._send(response, rid, prompt, output, logprobs, sent, finish, version)
            sent = len(output)
            if finish is not None:
                await response.write(b"data: [DONE]\n\n")
                return

    def _forward(
        self, feed: list[int], cache: Any, params: SamplingParams, generator: torch.Generator
    ) -> tuple[int, float]:
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([feed]), cache=cache, use_cache=True)
        return pick_token(out.logits[0, -1], params, generator)

    async def _send(
        self,
        response: web.StreamResponse,
        rid: int,
        prompt: list[int],
        output: list[int],
        logprobs: list[list[Any]],
        sent: int,
        finish: dict[str, Any] | None,
        version: str | None = None,
    ) -> None:
        start = sent if self.incremental else 0
        meta = {
            "id": str(rid),
            "finish_reason": finish,
            "prompt_tokens": len(prompt),
            "completion_tokens": len(output),
            "cached_tokens": 0,
            "weight_version": version or self.version,
            "output_token_logprobs": logprobs[start:],
        }
        event = {"text": "", "output_ids": output[start:], "meta_info": meta}
        await response.write(f"data: {json.dumps(event)}\n\n".encode())


def _read_folder(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise OSError(f"no safetensors in {folder}")
    state: dict[str, torch.Tensor] = {}
    for path in files:
        state.update(load_file(str(path)))
    return state


def model_folder(models: Path) -> Path:
    """The embedded model's Hugging Face folder inside a `models` cache folder."""
    return next(path.parent for path in sorted(models.glob("*/model.safetensors")))
