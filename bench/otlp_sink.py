"""A local OTLP/HTTP sink for bench/run.sh --otel: takes every trace export and answers success, counting spans, so
reef's export costs what it costs against a collector that keeps up.

    python bench/otlp_sink.py --port 4318
"""

from __future__ import annotations

import argparse

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = web.AppKey("spans", list)


async def traces(request: web.Request) -> web.Response:
    message = ExportTraceServiceRequest.FromString(await request.read())
    request.app[SPANS][0] += sum(len(s.spans) for r in message.resource_spans for s in r.scope_spans)
    return web.Response(body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf")


async def count(request: web.Request) -> web.Response:
    return web.json_response({"spans": request.app[SPANS][0]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application()
    app[SPANS] = [0]
    app.router.add_post("/v1/traces", traces)
    app.router.add_get("/spans", count)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
