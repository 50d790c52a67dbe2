"""`reef tui`: a Textual app to watch records live, score them with single keys, ask for harness changes and
browse, promote, roll back and install versions. It knows the daemon only through `reef_client`."""

from reef_tui.app import ReefApp

__all__ = ["ReefApp"]
