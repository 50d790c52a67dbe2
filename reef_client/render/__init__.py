"""Daemon answers as the terminal shows them, the same in `reef`, the TUI and the wrappers: cells, tables and rich
renderables built from the contract's types. One module per thing shown; each is public."""

__all__ = ["conversation", "derived", "evidence", "formats", "live_scores", "record", "records", "versions"]
