# What Nova reads of the keys the DevStack plugin sets in nova.conf (tests/devstack/docs.sh),
# with Nova's own option definitions: run with the Python of the Nova test virtualenv
# (tests/support/venv.rs nova_venv).
# Usage: python nova-reads.py NOVA_CONF
# Loads NOVA_CONF as a Nova service does (nova.conf's options, and oslo.messaging's
# [oslo_messaging_notifications], which Nova's notifier registers) and prints, as JSON, each of
# those keys with the value Nova reads, and whether the notifier driver it names exists;
# exits non-zero, naming the key, when Nova has no such option or refuses its value.
import warnings
warnings.filterwarnings("ignore")
import json
import sys
from importlib.metadata import entry_points

import nova.conf
from oslo_config import cfg
from oslo_messaging import opts as messaging_opts

CONF = nova.conf.CONF
for group, opts in messaging_opts.list_opts():
    if group == "oslo_messaging_notifications":
        CONF.register_opts(opts, group=group)
CONF(["--config-file", sys.argv[1]], project="nova", default_config_files=[])

read = {}
for group, key in [("notifications", "notification_format"),
                   ("oslo_messaging_notifications", "driver")]:
    try:
        read[f"{group}.{key}"] = getattr(getattr(CONF, group), key)
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError, ValueError) as e:
        sys.exit(f"{sys.argv[1]}: Nova does not read [{group}] {key}: {e}")
drivers = entry_points(group="oslo.messaging.notify.drivers")
read["known_drivers"] = [d for d in read["oslo_messaging_notifications.driver"]
                         if d in drivers.names]
print(json.dumps(read))
