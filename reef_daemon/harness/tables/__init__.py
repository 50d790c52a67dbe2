"""The store's tables only the harness uses: evaluation tasks and replays, canaries, and the live scores of
releases. They share the store's engine and transaction; `reef_daemon.store.Store` opens them."""
