#!/bin/bash
# shellcheck shell=bash
# DevStack plugin: Parasol in place of nova-scheduler.
#   stack install      build Parasol (installing Rust with rustup when cargo is missing)
#   stack post-config  create the parasol service user, write $PARASOL_CONF, check it, set
#                      nova.conf for versioned notifications
#   stack extra        run Parasol as the devstack@parasol systemd unit
#   unstack            stop the unit
#   clean              remove the unit, configuration, ledger, binary and nova.conf keys

function parasol_cargo {
    if type -P cargo >/dev/null; then
        cargo "$@"
    else
        "$PARASOL_CARGO_HOME/bin/cargo" "$@"
    fi
}

function install_rust_toolchain {
    if type -P cargo >/dev/null || [[ -x "$PARASOL_CARGO_HOME/bin/cargo" ]]; then
        return 0
    fi
    echo "cargo not found: installing a Rust toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
        CARGO_HOME="$PARASOL_CARGO_HOME" sh -s -- -y --profile minimal --no-modify-path
}

function install_parasol {
    install_rust_toolchain
    parasol_cargo build --release --locked \
        --manifest-path "$PARASOL_DIR/Cargo.toml" --target-dir "$PARASOL_DIR/target"
    sudo install -m 0755 "$PARASOL_DIR/target/release/parasol" "$PARASOL_BIN_DIR/parasol"
}

# The URL-encoded default vhost "/" that DevStack's RabbitMQ uses.
function parasol_amqp_url {
    echo "amqp://${RABBIT_USERID}:${RABBIT_PASSWORD}@${RABBIT_HOST}:5672/%2f"
}

function write_parasol_conf {
    local placement_url="${PLACEMENT_SERVICE_PROTOCOL:-$SERVICE_PROTOCOL}://${PLACEMENT_SERVICE_HOST:-$SERVICE_HOST}/placement"
    cat <<TOML
# Written by the Parasol DevStack plugin (devstack/plugin.sh); see etc/parasol.toml.
[server]
host = "${SERVICE_LISTEN_ADDRESS:-0.0.0.0}"
port = ${PARASOL_PORT}

# Every route but /healthz, /readyz, /metrics and / needs a Keystone token with a role of
# PARASOL_ROLES, validated with the parasol service user's own token.
[auth]
strategy = "keystone"
keystone_url = "${KEYSTONE_SERVICE_URI}/v3"
username = "parasol"
password = "${SERVICE_PASSWORD}"
project_name = "${SERVICE_PROJECT_NAME:-service}"
user_domain_name = "${SERVICE_DOMAIN_NAME:-Default}"
project_domain_name = "${SERVICE_DOMAIN_NAME:-Default}"
roles = ["${PARASOL_ROLES//,/\", \"}"]
read_roles = ["${PARASOL_ROLES//,/\", \"}"]

[ledger]
data_dir = "${PARASOL_DATA_DIR}"

[scheduler]
backend = "${PARASOL_BACKEND}"
workers = ${PARASOL_WORKERS}

[amqp]
url = "$(parasol_amqp_url)"
exchange = "nova"

[rpc]
enabled = true
host = "${HOSTNAME:-parasol}"
topic = "scheduler"

[placement]
enabled = true
url = "${placement_url}"
auth = "keystone"
keystone_url = "${KEYSTONE_SERVICE_URI}/v3"
username = "nova"
password = "${SERVICE_PASSWORD}"
project_name = "${SERVICE_PROJECT_NAME:-service}"
user_domain_name = "${SERVICE_DOMAIN_NAME:-Default}"
project_domain_name = "${SERVICE_DOMAIN_NAME:-Default}"
sync_interval_s = ${PARASOL_PLACEMENT_SYNC_INTERVAL}
TOML
}

# The parasol service user, in the service project with the service role: enough to validate
# callers' tokens (Keystone's identity:validate_token), nothing more.
function create_parasol_accounts {
    create_service_user "parasol" "service"
}

function configure_parasol {
    sudo install -d -o "$STACK_USER" "$PARASOL_CONF_DIR" "$PARASOL_DATA_DIR"
    write_parasol_conf | sudo tee "$PARASOL_CONF" >/dev/null
    sudo chown "$STACK_USER" "$PARASOL_CONF"
    sudo chmod 0640 "$PARASOL_CONF"
    "$PARASOL_BIN_DIR/parasol" config check "$PARASOL_CONF" ||
        die $LINENO "Parasol refused $PARASOL_CONF"
}

# Nova's versioned notifications tell Parasol about instances and services.
function configure_nova_for_parasol {
    local conf
    for conf in "$NOVA_CONF" "${NOVA_CPU_CONF:-}"; do
        [[ -n "$conf" ]] || continue
        iniset "$conf" notifications notification_format versioned
        iniset "$conf" oslo_messaging_notifications driver messagingv2
    done
}

function start_parasol {
    run_process parasol "$PARASOL_BIN_DIR/parasol --config $PARASOL_CONF serve"
}

function stop_parasol {
    stop_process parasol
}

function cleanup_parasol {
    local conf
    for conf in "$NOVA_CONF" "${NOVA_CPU_CONF:-}"; do
        [[ -n "$conf" && -f "$conf" ]] || continue
        inidelete "$conf" notifications notification_format
        inidelete "$conf" oslo_messaging_notifications driver
    done
    sudo rm -f "$SYSTEMD_DIR/devstack@parasol.service"
    $SYSTEMCTL daemon-reload
    sudo rm -rf "$PARASOL_CONF_DIR" "$PARASOL_DATA_DIR"
    sudo rm -f "$PARASOL_BIN_DIR/parasol"
}

if is_service_enabled parasol; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Building Parasol"
        install_parasol
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring Parasol (backend $PARASOL_BACKEND)"
        create_parasol_accounts
        configure_parasol
        configure_nova_for_parasol
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        echo_summary "Starting Parasol"
        start_parasol
    fi
    if [[ "$1" == "unstack" ]]; then
        stop_parasol
    fi
    if [[ "$1" == "clean" ]]; then
        cleanup_parasol
    fi
fi
