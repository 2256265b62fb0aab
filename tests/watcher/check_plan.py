"""Runs Parasol's Watcher strategy (devstack/watcher/parasol_strategy.py) with the real
python-watcher: the class against Watcher's base strategy, its execution against a running
Parasol, and every action it adds against Watcher's `migrate` action's input schema.

Usage: check_plan.py <parasol base url> <folder of parasol_strategy.py>
Prints {"actions": [...], "indicators": {...}} as JSON on stdout.
"""

import json
import sys

import jsonschema

from watcher.applier.actions.migration import Migrate
from watcher.common import utils
from watcher.decision_engine.strategy.strategies import base

url, plugin_dir = sys.argv[1], sys.argv[2]
sys.path.insert(0, plugin_dir)
import parasol_strategy  # noqa: E402

cls = parasol_strategy.ParasolFmu
assert issubclass(cls, base.WorkloadStabilizationBaseStrategy), cls.__mro__
assert issubclass(cls, base.BaseStrategy)
assert cls.get_goal_name() == "workload_balancing", cls.get_goal_name()
assert not getattr(cls, "__abstractmethods__", None), cls.__abstractmethods__
jsonschema.Draft4Validator.check_schema(cls.get_schema())

strategy = cls(config=utils.Struct(parasol_url=url, parasol_token=None, timeout=30.0))
assert strategy.goal.name == "workload_balancing", strategy.goal.name
strategy.input_parameters = utils.Struct(solver="gbm", max_moves=50, seed=1, hosts=[])
solution = strategy.execute()

checked = []
for action in solution.actions:
    assert action["action_type"] == "migrate", action
    migrate = Migrate(config=utils.Struct(), osc=None)
    migrate.input_parameters = action["input_parameters"]
    migrate.validate_parameters()
    assert migrate.migration_type == Migrate.LIVE_MIGRATION
    checked.append(action["input_parameters"])

# The schema is a real check: a wrong action is refused by it.
bad = dict(checked[0], migration_type="teleport") if checked else {"migration_type": "live"}
try:
    jsonschema.validate(bad, Migrate(config=utils.Struct()).schema)
except jsonschema.ValidationError:
    pass
else:
    raise AssertionError(f"Watcher's schema took {bad}")

indicators = {i.name: i.value for i in solution.efficacy_indicators}
json.dump({"actions": checked, "indicators": indicators}, sys.stdout)
