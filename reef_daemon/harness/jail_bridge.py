"""Runs inside a trial's jail (no network but its own loopback): serve 127.0.0.1:PORT by relaying each connection
to the model socket reef bind-mounted in, run the agent, and exit with its status.

`python -m reef_daemon.harness.jail_bridge PORT SOCKET -- AGENT ARGS...`. Standard library only, so it starts fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

CHUNK = 65536


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def splice(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connect: Callable[[], Awaitable[Streams]]
) -> None:
    """Join a connection to a new one from `connect`, both ways, until both ends are closed."""
    try:
        far_reader, far_writer = await connect()
    except OSError:
        writer.close()
        return
    await asyncio.gather(_pipe(reader, far_writer), _pipe(far_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction of a connection until it ends, then close the other side."""
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def bridge(port: int, socket_path: str, argv: list[str]) -> int:
    def model() -> Awaitable[Streams]:
        return asyncio.open_unix_connection(socket_path)

    server = await asyncio.start_server(lambda reader, writer: splice(reader, writer, model), "127.0.0.1", port)
    async with server:
        agent = await asyncio.create_subprocess_exec(*argv)
        return await agent.wait()


def main(args: list[str]) -> int:
    if len(args) < 4 or args[2] != "--":
        print("usage: python -m reef_daemon.harness.jail_bridge PORT SOCKET -- AGENT [ARGS...]", file=sys.stderr)
        return 2
    return asyncio.run(bridge(int(args[0]), args[1], args[3:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
