"""Every call Nova's services make to the scheduler, with what it carried and what came back
(runs in the venv; both modes, so the report can set Nova's scheduler's answers beside
Parasol's for the same test).

A call is labelled with the operation that made it, read from the caller's stack: the
conductor method (boot, resize/migrate, evacuate/rebuild, unshelve, live migration) or the
API (aggregates) or compute (instance info).
"""

import sys

from nova.scheduler import rpcapi as scheduler_rpcapi

from nova_functional.state import Current

# Innermost caller function → operation.
SITES = [
    ("schedule_and_build_instances", "boot"),
    ("build_instances", "boot (legacy/reschedule)"),
    ("_schedule", "resize/migrate"),
    ("_get_candidate_destination", "live-migrate"),
    ("_find_destination", "live-migrate"),
    ("rebuild_instance", "evacuate/rebuild"),
    ("unshelve_instance", "unshelve"),
    ("_execute", "cross-cell/other task"),
]
LIMIT = 40


def _operation():
    frame = sys._getframe(2)
    names = []
    while frame is not None and len(names) < 30:
        code = frame.f_code
        if "/nova/" in code.co_filename and "/tests/" not in code.co_filename:
            names.append(code.co_name)
        frame = frame.f_back
    for site, op in SITES:
        if site in names:
            return op
    return names[0] if names else "?"


def _spec(spec_obj):
    out = {}
    try:
        out["flavor"] = spec_obj.flavor.name
        out["num_instances"] = spec_obj.num_instances
        for field in ("force_hosts", "force_nodes", "ignore_hosts", "availability_zone"):
            if spec_obj.obj_attr_is_set(field) and getattr(spec_obj, field):
                out[field] = getattr(spec_obj, field)
        dest = spec_obj.requested_destination if spec_obj.obj_attr_is_set(
            "requested_destination") else None
        if dest is not None:
            out["requested_destination"] = {
                k: (getattr(dest, k).name if k == "cell" else getattr(dest, k))
                for k in ("host", "node", "cell", "aggregates", "forbidden_aggregates")
                if dest.obj_attr_is_set(k) and getattr(dest, k)}
        hints = spec_obj.scheduler_hints if spec_obj.obj_attr_is_set("scheduler_hints") else {}
        if hints:
            out["hints"] = {k: v for k, v in hints.items()}
        if spec_obj.obj_attr_is_set("instance_group") and spec_obj.instance_group:
            out["group_policy"] = spec_obj.instance_group.policy
        extra = spec_obj.flavor.extra_specs if spec_obj.flavor.obj_attr_is_set(
            "extra_specs") else {}
        if extra:
            out["extra_specs"] = dict(extra)
        image = spec_obj.image if spec_obj.obj_attr_is_set("image") else None
        if image is not None and image.obj_attr_is_set("properties"):
            props = image.properties.obj_to_primitive().get("nova_object.data", {})
            if props:
                out["image_properties"] = props
        if spec_obj.obj_attr_is_set("is_bfv") and spec_obj.is_bfv:
            out["is_bfv"] = True
    except Exception as e:  # a partial spec is still worth recording
        out["unreadable"] = f"{type(e).__name__}: {e}"
    return out


def _answer(result):
    rows = []
    for row in result or []:
        if isinstance(row, dict):  # legacy form
            rows.append([f"{row.get('host')}/{row.get('nodename')}"])
            continue
        rows.append([f"{s.service_host}/{s.nodename}"
                     + ("" if s.obj_attr_is_set("allocation_request") and s.allocation_request
                        else " (no allocation_request)") for s in row])
    return rows


def _record(entry, keep=True):
    calls = Current.record.setdefault("scheduler_calls", [])
    if keep and len(calls) < LIMIT:
        calls.append(entry)
    counts = Current.record.setdefault("scheduler_call_counts", {})
    counts[entry["method"]] = counts.get(entry["method"], 0) + 1


def _wrap_select(orig):
    def select_destinations(self, ctxt, spec_obj, instance_uuids, return_objects=False,
                            return_alternates=False):
        entry = {"method": "select_destinations", "op": _operation(), "spec": _spec(spec_obj),
                 "alternates": return_alternates}
        try:
            result = orig(self, ctxt, spec_obj, instance_uuids, return_objects=return_objects,
                          return_alternates=return_alternates)
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"[:300]
            _record(entry)
            raise
        entry["answer"] = _answer(result)
        _record(entry)
        return result
    return select_destinations


def _wrap_other(name, orig):
    def call(self, ctxt, *args, **kwargs):
        entry = {"method": name}
        try:
            return orig(self, ctxt, *args, **kwargs)
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"[:300]
            raise
        finally:
            # Only the failed ones are kept: compute sends these on every change.
            _record(entry, keep="error" in entry)
    return call


def install():
    api = scheduler_rpcapi.SchedulerAPI
    api.select_destinations = _wrap_select(api.select_destinations)
    for name in ("update_aggregates", "delete_aggregate", "update_instance_info",
                 "delete_instance_info", "sync_instance_info"):
        setattr(api, name, _wrap_other(name, getattr(api, name)))
