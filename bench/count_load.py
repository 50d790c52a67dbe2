"""A fixed number of answers from a proxy, at a fixed concurrency, with the bench's client; prints how many were OK.

bench/.venv-bench/bin/python bench/count_load.py PORT COUNT STREAM(0|1) CONCURRENCY
"""

from __future__ import annotations

import asyncio
import sys

import uvloop
from proxy_overhead import build_request, connect


async def main(port: int, count: int, stream: bool, concurrency: int) -> None:
    request = build_request(port, stream=stream)
    left, ok = [count], [0]

    async def worker() -> None:
        conn = await connect(port)
        while left[0] > 0:
            left[0] -= 1
            outcome = await conn.exchange(request, keep_body=False)
            ok[0] += outcome.ok
        conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    print(ok[0])


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])))
