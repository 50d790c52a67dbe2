"""Shell completion scripts generated from the command tree: static, so completing never starts Python."""

from reef_cli.completion.scripts import SHELLS, completion_script

__all__ = ["SHELLS", "completion_script"]
