"""`python -m reef_cli` runs the `reef` command."""

from reef_cli.app import main

main()
