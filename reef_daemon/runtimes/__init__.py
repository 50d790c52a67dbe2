"""Where answers come from: `http` (any compatible endpoint) and, later, `embedded` and `sglang`."""
