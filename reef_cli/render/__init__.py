"""What only the `reef` command shows: the daemon's status and scenarios, evaluation tasks, and the SAO demo. The
renderers the TUI and the wrappers share live in `reef_client.render`."""
