"""The `reef` subcommands, one module per noun; `reef_cli.app` registers them."""
