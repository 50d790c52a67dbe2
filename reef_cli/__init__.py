"""The `reef` command line."""
