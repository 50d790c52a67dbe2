"""Training with Slime (Ray + Megatron) instead of in-process torch: reef's side of the contract.

`contract.py` holds what reef hands Slime (sample fields, command-line flags, the processes and ports it starts) and
what it checks first; `spool.py` carries eligible rollouts from reef to Slime's rollout function (`rollout_fn.py`,
which runs inside Slime's RolloutManager actor).
"""
