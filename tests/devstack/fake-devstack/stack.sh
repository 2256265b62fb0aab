#!/bin/bash
# The fake DevStack's stack.sh: the steps around the plugins that Parasol depends on.
# shellcheck source=tests/devstack/fake-devstack/functions
source "$(dirname "$0")/functions"
load_plugins
run_phase stack pre-install
if is_service_enabled rabbit; then
    echo_summary "Starting RabbitMQ"
    start_rabbitmq
    rabbitmq_user "$RABBIT_USERID" "$RABBIT_PASSWORD"
fi
run_phase stack install
if is_service_enabled key; then
    echo_summary "Starting Keystone"
    configure_keystone
    init_keystone
    start_keystone
    bootstrap_keystone
    admin_credentials
    create_keystone_accounts
    if is_service_enabled n-api; then create_nova_accounts; fi
fi
echo_summary "Configuring Nova"
sudo install -d "$(dirname "$NOVA_CONF")" "$DATA_DIR"
for conf in "$NOVA_CONF" "$NOVA_CPU_CONF"; do
    printf '[DEFAULT]\ntransport_url = rabbit://%s:%s@%s:5672/\n' \
        "$RABBIT_USERID" "$RABBIT_PASSWORD" "$RABBIT_HOST" | sudo tee "$conf" >/dev/null
done
run_phase stack post-config
echo_summary "Starting Nova"
for service in "${NOVA_SERVICES[@]}"; do
    if is_service_enabled "$service"; then run_process "$service" "/bin/sleep infinity"; fi
done
run_phase stack extra
run_phase stack test-config
declare -p ENABLED_SERVICES >"$TOP_DIR/.stackenv"
echo "stack.sh completed"
