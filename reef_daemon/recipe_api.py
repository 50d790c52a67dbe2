"""What a recipe imports: the recipe interface (`recipe_interface.py`: what a recipe implements and what the daemon
hands it) and the recipe toolkit below, in one module.

A recipe decides what reef does with scored records: nothing (`record`), train the served weights (`sao`), or evolve
an agent harness (`reefine`). A new one subclasses `Recipe` (or `HarnessRecipe`), is named on the command line as
`package.module:Class`, and needs nothing from reef but the names exported here.

The daemon's side of the contract, in order:
1. `Recipe(settings)` when the daemon is built. Raise `SettingsError` for a setting the recipe cannot work with.
2. `start(context)` once the store is open and the runtime started: the `RecipeContext` holds what the daemon
   lends the recipe (a view of the store, the runtime, the settings, the token gate, the requests' progress).
3. `listening(context)` once the daemon accepts connections: the same context, its `url` now set.
4. For each scenario bound to the recipe, the recipe worker reads new records of the types in `consumes`, in order,
   asks `judge` about each, and calls `step` with `batch_size` eligible ones. Each step is committed with the
   records it consumed; a record is never handed to `step` twice, across restarts too.
5. `promote` and `rollback` when a person asks (`POST /reef/scenarios/{s}/promote|rollback`), never during a step.
6. `close()` on shutdown.

A recipe's own settings are sections of frozen dataclasses whose fields are declared with `setting(...)`, listed by
name in `SETTINGS_SECTIONS` in the module its reference names (`package.module`, so that they are known without
loading the recipe's class); the recipe reads its section with `settings.of(Section)`:

    @dataclass(frozen=True)
    class SparkleSection:
        depth: int = setting(3, POSITIVE_INT, help="how deep the sparkle goes")

    SETTINGS_SECTIONS = {"sparkle": SparkleSection}  # sparkle.depth, in config files and the environment

A built-in recipe's sections are known before any recipe is chosen, so they are `reef serve` options too.

Records reach a recipe as `Unit`s: the stored record (`contract.StoredRecord`, as `GET /reef/records/{id}` shows it:
`id`, `type` (`inference`, `report`, `request`), `sequence`, `scenario`, and the type's fields: `score`, `references`
... for a report; `text` for a change request), and for a report the records it references, each with
`consumed_by_step`.

Besides `reef_contract` (the wire types), this module is all of reef a recipe imports: the built-in recipes
are held to it (`tests/daemon/test_boundaries.py`). What it offers beyond the interface above:

- errors: the `ReefError` family a recipe raises to answer a person (`NotFound`, `Conflict`, `BadRequest`,
  `Unsupported`), and `UpstreamFailed`, what `Runtime.send` raises when the model cannot be reached;
- the context (`RecipeContext`) and the types of what it holds: `StoreView`, the store as a recipe reads it
  (scenarios, records, steps, tasks; the daemon's store satisfies it), `RecordQuery` for `store.records.list`, and
  `gate_tasks`, the protected tasks and replays an evaluation of a candidate runs; `TokenLender`, the gate that lends
  model-call tokens to the recipe's processes; `presented_token` reads one off a request;
- a harness recipe's parts (`HarnessRecipe`): `HarnessHost` (its releases), `RequestProgress` (its requests'
  progress), `admit` and `Refused` (the check every proposed change passes; `RESERVED_IDS` are reef's own entries),
  `bound_files` (a tree as the adapter's files), `find_credential` (a credential in text), `Budget` (a count of
  model calls a run may make);
- the sandbox a recipe runs agents in: `jail_argv`, `needed_paths`, `model_endpoint`, `check_sandbox_setting` and
  the sandbox settings' words `BWRAP`, `NO_SANDBOX` (with `NO_BWRAP`, what to say when bubblewrap is missing);
- untrusted regular expressions, with bounded size, compile memory and time: `compiled`, `checked` (compiled off
  the event loop), `search`, `Found`, `BadPattern`;
- `rank_group` and `Ranked`: a judge ranks several answers to one task against each other in one call (RULER's
  way), a gate's judge or a group's rewards;
- `ReleaseStore`, the git release store a recipe keeps its own releases in (weight checkpoints);
- `json_response`, `read_body` and `parse_json_object`, for routes a recipe serves to its own processes (a body
  read with the daemon's own bounds on size and nesting).

A recipe named as `package.module:Class` loads as a built-in one does; one written against an earlier reef changes
only its signatures: `start(store, runtime)` is now `start(context)` (`context.store`, `context.runtime`), and
`listening(url, gate)` is now `listening(context)` (`context.url`, `context.gate`).
"""

from __future__ import annotations

from reef_daemon.auth import presented_token
from reef_daemon.errors import BadRequest, Conflict, NotFound, ReefError, Unsupported, UpstreamFailed
from reef_daemon.harness.admission import RESERVED_IDS, Refused, admit
from reef_daemon.harness.host import HarnessHost
from reef_daemon.harness.install.files import bound_files
from reef_daemon.harness.jail import BWRAP, NO_BWRAP, check_sandbox_setting, jail_argv, model_endpoint, needed_paths
from reef_daemon.harness.jail import NONE as NO_SANDBOX
from reef_daemon.harness.model_relay import Budget
from reef_daemon.harness.progress import RequestProgress
from reef_daemon.harness.screens import find_credential
from reef_daemon.jsonbody import json_response, parse_json_object, read_body
from reef_daemon.recipe_interface import (
    AdapterServing,
    Eligible,
    HarnessRecipe,
    Ineligible,
    Recipe,
    RecipeContext,
    ReferencedRecord,
    Serving,
    StepOutcome,
    TokenLender,
    Unit,
    Verdict,
)
from reef_daemon.releases import ReleaseStore
from reef_daemon.reports.judge import Ranked, rank_group
from reef_daemon.runtimes.base import Runtime, WeightSwappable
from reef_daemon.setting_kinds import (
    COUNT,
    FRACTION,
    NUMBER,
    OPTIONAL_PATH,
    OPTIONAL_TEXT,
    PATH,
    PORT,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    TEXT,
    TOKENS,
    URL,
    Kind,
    SettingsError,
    one_of,
    setting,
)
from reef_daemon.settings import Settings
from reef_daemon.store import Scenario, gate_tasks
from reef_daemon.store.records import RecordQuery
from reef_daemon.store.view import StoreView
from reef_daemon.untrusted_regex import BadPattern, Found, checked, compiled, search

__all__ = [
    "BWRAP",
    "COUNT",
    "FRACTION",
    "NO_BWRAP",
    "NO_SANDBOX",
    "NUMBER",
    "OPTIONAL_PATH",
    "OPTIONAL_TEXT",
    "PATH",
    "PORT",
    "POSITIVE_INT",
    "POSITIVE_NUMBER",
    "RESERVED_IDS",
    "TEXT",
    "TOKENS",
    "URL",
    "AdapterServing",
    "BadPattern",
    "BadRequest",
    "Budget",
    "Conflict",
    "Eligible",
    "Found",
    "HarnessHost",
    "HarnessRecipe",
    "Ineligible",
    "Kind",
    "NotFound",
    "Ranked",
    "Recipe",
    "RecipeContext",
    "RecordQuery",
    "ReefError",
    "ReferencedRecord",
    "Refused",
    "ReleaseStore",
    "RequestProgress",
    "Runtime",
    "Scenario",
    "Serving",
    "Settings",
    "SettingsError",
    "StepOutcome",
    "StoreView",
    "TokenLender",
    "Unit",
    "Unsupported",
    "UpstreamFailed",
    "Verdict",
    "WeightSwappable",
    "admit",
    "bound_files",
    "check_sandbox_setting",
    "checked",
    "compiled",
    "find_credential",
    "gate_tasks",
    "jail_argv",
    "json_response",
    "model_endpoint",
    "needed_paths",
    "one_of",
    "parse_json_object",
    "presented_token",
    "rank_group",
    "read_body",
    "search",
    "setting",
]
