#!/bin/bash
# The fake DevStack's unstack.sh: stops the plugins, the Nova stand-ins and Keystone.
# shellcheck source=tests/devstack/fake-devstack/functions
source "$(dirname "$0")/functions"
load_plugins
run_phase unstack
for service in "${NOVA_SERVICES[@]}"; do
    if is_service_enabled "$service"; then stop_process "$service"; fi
done
if is_service_enabled key; then stop_keystone; fi
