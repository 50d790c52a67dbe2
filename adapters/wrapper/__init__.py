"""The `reef-<adapter>` wrapper: starts the agent on the installed harness with its model traffic going through
reef, and reports, files change requests for, lists, updates and checks that install. The sh stub the install
script writes runs `python -m adapters.wrapper <adapter> ...`; everything here talks to reef through `reef_client`."""
