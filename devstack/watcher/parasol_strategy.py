# Licensed under the Apache License, Version 2.0.
"""A Watcher strategy that asks Parasol for its Fair Maximum Utilization plan.

Parasol (docs/fmu.md) plans live migrations over what it already holds: every host's
inventory, allocation ratios and state, every instance's allocation, and the hosts' measured
usage. This strategy (goal ``workload_balancing``) calls Parasol's
``POST /v1/rebalance/plan?format=watcher`` and adds the ``migrate`` actions it answers, in
the plan's order, to Watcher's solution; Watcher's applier then carries them out through
Nova. It reads no Watcher datasource and no compute model of its own.

Install (see devstack/watcher/README.md): ``pip install devstack/watcher`` registers the
entry point ``parasol_fmu`` under ``watcher_strategies``; configure
``[watcher_strategies.parasol_fmu] parasol_url`` (and ``parasol_token`` when Parasol's
``[auth] strategy`` is not ``none``).
"""

import json
import urllib.error
import urllib.request

from oslo_config import cfg
from oslo_log import log

from watcher.decision_engine.strategy.strategies import base

LOG = log.getLogger(__name__)


class ParasolPlanError(Exception):
    """Parasol did not give a plan (unreachable, or refused the request with a reason)."""


class ParasolFmu(base.WorkloadStabilizationBaseStrategy):
    """Rebalance with Parasol's Fair Maximum Utilization plan (GBM by default)."""

    MIGRATION = "migrate"

    @classmethod
    def get_name(cls):
        return "parasol_fmu"

    @classmethod
    def get_display_name(cls):
        return "Parasol Fair Maximum Utilization"

    @classmethod
    def get_translatable_display_name(cls):
        return "Parasol Fair Maximum Utilization"

    @classmethod
    def get_config_opts(cls):
        return [
            cfg.StrOpt(
                "parasol_url",
                default="http://127.0.0.1:8778",
                help="Base URL of Parasol's HTTP API.",
            ),
            cfg.StrOpt(
                "parasol_token",
                default=None,
                secret=True,
                help="X-Auth-Token for Parasol (its [auth] token, or a Keystone token).",
            ),
            cfg.FloatOpt(
                "timeout",
                default=60.0,
                help="Seconds to wait for Parasol's plan.",
            ),
        ]

    @classmethod
    def get_schema(cls):
        return {
            "properties": {
                "solver": {
                    "description": "Parasol's solver: gbm, bcpu, bcpu2 or sa.",
                    "type": "string",
                    "enum": ["gbm", "bcpu", "bcpu2", "sa"],
                    "default": "gbm",
                },
                "max_moves": {
                    "description": "Most live migrations in the plan.",
                    "type": "integer",
                    "minimum": 1,
                    "default": 50,
                },
                "seed": {
                    "description": "Seed of the solver's random choices.",
                    "type": "integer",
                    "minimum": 0,
                    "default": 1,
                },
                "hosts": {
                    "description": "Balance among these compute hosts only.",
                    "type": "array",
                    "items": {"type": "string"},
                    "default": [],
                },
            },
        }

    def __init__(self, config, osc=None):
        super().__init__(config, osc)
        self.plan = None

    def pre_execute(self):
        # Parasol holds the cloud's state; Watcher's compute model is not needed.
        LOG.info("Initializing %s", self.get_display_name())

    def request_body(self):
        params = self.input_parameters
        body = {
            "solver": params.get("solver", "gbm"),
            "max_moves": params.get("max_moves", 50),
            "seed": params.get("seed", 1),
        }
        if params.get("hosts"):
            body["hosts"] = list(params["hosts"])
        return body

    def fetch_plan(self):
        url = self.config.parasol_url.rstrip("/") + "/v1/rebalance/plan?format=watcher"
        request = urllib.request.Request(
            url,
            data=json.dumps(self.request_body()).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        if self.config.get("parasol_token"):
            request.add_header("X-Auth-Token", self.config.parasol_token)
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as e:
            try:
                message = json.load(e)["error"]["message"]
            except Exception:
                message = str(e)
            raise ParasolPlanError(f"Parasol refused the plan ({e.code}): {message}") from e
        except urllib.error.URLError as e:
            raise ParasolPlanError(f"cannot reach Parasol at {url}: {e.reason}") from e

    def do_execute(self, audit=None):
        self.plan = self.fetch_plan()
        for action in self.plan["actions"]:
            params = dict(action["input_parameters"])
            resource_id = params.pop("resource_id")
            self.solution.add_action(
                action_type=action["action_type"],
                resource_id=resource_id,
                input_parameters=params,
            )
        LOG.info(
            "Parasol planned %d live migrations on revision %s: cost %.4f -> %.4f",
            len(self.plan["actions"]),
            self.plan["base_revision"],
            self.plan["before"]["cost"],
            self.plan["after"]["cost"],
        )

    def post_execute(self):
        plan = self.plan or {}
        self.solution.set_efficacy_indicators(
            instance_migrations_count=len(plan.get("actions", [])),
            instances_count=plan.get("instances", 0),
            standard_deviation_before_audit=plan.get("load_std_dev", {}).get("before", 0.0),
            standard_deviation_after_audit=plan.get("load_std_dev", {}).get("after", 0.0),
        )
