#!/bin/bash
# The fake DevStack's clean.sh: unstack, the plugins' clean phase, then DevStack's own files.
# shellcheck source=tests/devstack/fake-devstack/functions
source "$(dirname "$0")/functions"
"$TOP_DIR/unstack.sh"
load_plugins
run_phase clean
stop_rabbitmq
for service in "${NOVA_SERVICES[@]}"; do
    if is_service_enabled "$service"; then
        $SYSTEMCTL disable "devstack@$service.service" >/dev/null
        sudo rm -f "$SYSTEMD_DIR/devstack@$service.service"
    fi
done
if is_service_enabled key; then
    $SYSTEMCTL disable devstack@keystone.service >/dev/null
    sudo rm -rf "$SYSTEMD_DIR/devstack@keystone.service" "$KEYSTONE_CONF_DIR" "$KEYSTONE_DATA_DIR"
fi
rm -f "$TOP_DIR/.stackenv"
