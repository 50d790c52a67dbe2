"""The three API shapes the embedded runtime answers in: OpenAI chat completions, OpenAI Responses, Anthropic
Messages. Each parses its request into chat turns and sampling parameters, and renders the answer as JSON or as
SSE frames.
"""
