#!/bin/bash
# Runs every phase of devstack/plugin.sh with DevStack's functions stubbed (stubs.sh) in a
# sandbox, and checks the files and commands each phase produces.
# Usage: harness.sh PARASOL_BINARY   (tests/devstack.rs passes the freshly built one)
set -euo pipefail

HARNESS_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HARNESS_DIR/../.." && pwd)
export HARNESS_DIR
export PARASOL_BIN=${1:?usage: harness.sh PARASOL_BINARY}
SANDBOX=$(mktemp -d)
trap 'rm -rf "$SANDBOX"' EXIT
export CALLS=$SANDBOX/calls
: >"$CALLS"

fail() { echo "FAIL: $*" >&2; exit 1; }
check() { local what=$1; shift; "$@" || fail "$what"; echo "ok - $what"; }
called() { grep -qxF -- "$*" "$CALLS"; }
toml_has() { grep -qxF -- "$1" "$PARASOL_CONF"; }

# DevStack's variables, as stack.sh has them when plugins run.
export DEST=$SANDBOX/opt/stack DATA_DIR=$SANDBOX/opt/stack/data HOME=$SANDBOX/home
STACK_USER=$(id -un)
SYSTEMD_DIR=$SANDBOX/systemd
SYSTEMCTL="record systemctl"
NOVA_CONF=$SANDBOX/etc/nova/nova.conf
NOVA_CPU_CONF=$SANDBOX/etc/nova/nova-cpu.conf
RABBIT_USERID=stackrabbit RABBIT_PASSWORD=rabbitsecret RABBIT_HOST=10.0.0.5
SERVICE_PROTOCOL=http SERVICE_HOST=10.0.0.5 SERVICE_PASSWORD=servicesecret
SERVICE_PROJECT_NAME=service SERVICE_DOMAIN_NAME=Default
KEYSTONE_SERVICE_URI=http://10.0.0.5/identity
ENABLED_SERVICES=key,n-api,n-cond,n-sch,n-cpu,placement-api,rabbit
mkdir -p "$DEST" "$DATA_DIR" "$HOME" "$SYSTEMD_DIR" "$SANDBOX/etc/nova" "$SANDBOX/bin"
printf '[DEFAULT]\ndebug = True\n' | tee "$NOVA_CONF" >"$NOVA_CPU_CONF"
# `enable_plugin parasol <repo>` clones into $DEST/parasol: link the repo's files there but
# give the clone its own target/, so the stubbed build never overwrites the repo's
# target/release/parasol. The binary goes to a sandbox bin.
mkdir -p "$DEST/parasol/target"
for entry in "$REPO"/*; do
    [[ $(basename "$entry") == target ]] || ln -s "$entry" "$DEST/parasol/"
done
PARASOL_CONF_DIR=$SANDBOX/etc/parasol
PARASOL_BIN_DIR=$SANDBOX/bin
# No cargo on PATH: the install phase must fetch rustup.
keep=()
IFS=: read -ra dirs <<<"$PATH"
for dir in "${dirs[@]}"; do [[ -x "$dir/cargo" ]] || keep+=("$dir"); done
PATH=$(IFS=:; echo "${keep[*]}")
# Exported so the stubbed rustup installer (a child shell) writes into the sandbox only.
export PARASOL_CARGO_HOME=$HOME/.cargo
PARASOL_BACKEND=${PARASOL_BACKEND:-apsr}

# shellcheck source=tests/devstack/stubs.sh
source "$HARNESS_DIR/stubs.sh"
# shellcheck source=devstack/settings
source "$REPO/devstack/settings"
check "settings enable parasol" is_service_enabled parasol
check "settings disable n-sch" bash -c "! grep -qw n-sch <<<'$ENABLED_SERVICES'"
check "settings keep the other services" is_service_enabled n-cond

phase() { echo "# phase: $*"; set -- "$@"; source "$REPO/devstack/plugin.sh" "$@"; }

phase stack install
check "rustup installed when cargo is missing" grep -q '^curl .*https://sh.rustup.rs' "$CALLS"
check "cargo builds the release binary" grep -q -- '^cargo build --release --locked' "$CALLS"
check "the binary is installed" test -x "$PARASOL_BIN_DIR/parasol"
check "the build stays in the sandbox" test -x "$DEST/parasol/target/release/parasol" -a ! -L "$DEST/parasol/target"

phase stack post-config
check "parasol.toml written" test -f "$PARASOL_CONF"
check "parasol config check accepts it" "$PARASOL_BIN_DIR/parasol" config check "$PARASOL_CONF"
check "backend from PARASOL_BACKEND" toml_has "backend = \"$PARASOL_BACKEND\""
check "RPC server on" toml_has 'enabled = true'
check "RabbitMQ credentials" toml_has 'url = "amqp://stackrabbit:rabbitsecret@10.0.0.5:5672/%2f"'
check "Placement endpoint" toml_has 'url = "http://10.0.0.5/placement"'
check "Keystone endpoint" toml_has 'keystone_url = "http://10.0.0.5/identity/v3"'
check "Keystone password" toml_has 'password = "servicesecret"'
check "the parasol service user is created" called create_service_user parasol service
check "Keystone authentication of the API" toml_has 'strategy = "keystone"'
check "the parasol user validates tokens" toml_has 'username = "parasol"'
check "the admin role is needed" toml_has 'roles = ["admin"]'
check "no insecure bind" bash -c "! grep -q allow_insecure '$PARASOL_CONF'"
PARASOL_ROLES=admin,reader phase stack post-config >/dev/null
check "PARASOL_ROLES lists roles" toml_has 'read_roles = ["admin", "reader"]'
phase stack post-config >/dev/null
check "the ledger in DevStack's data dir" toml_has "data_dir = \"$DATA_DIR/parasol\""
for conf in "$NOVA_CONF" "$NOVA_CPU_CONF"; do
    check "versioned notifications in $(basename "$conf")" \
        called iniset "$conf" notifications notification_format versioned
    check "messagingv2 driver in $(basename "$conf")" \
        called iniset "$conf" oslo_messaging_notifications driver messagingv2
    check "$(basename "$conf") holds both keys" grep -qx 'notification_format = versioned' "$conf"
done

phase stack extra
UNIT=$SYSTEMD_DIR/devstack@parasol.service
check "run_process parasol" called run_process parasol "$PARASOL_BIN_DIR/parasol --config $PARASOL_CONF serve"
check "devstack@parasol unit written" grep -qF "ExecStart = $PARASOL_BIN_DIR/parasol --config $PARASOL_CONF serve" "$UNIT"
check "unit started" called systemctl start devstack@parasol.service

# Switching backends: change PARASOL_BACKEND and re-run post-config (or edit the file and
# `sudo systemctl reload devstack@parasol`, see devstack/README.md).
for backend in filter caching asc apsr; do
    PARASOL_BACKEND=$backend phase stack post-config >/dev/null
    check "backend $backend written and checked" toml_has "backend = \"$backend\""
done
PARASOL_BACKEND=nonsense
if (phase stack post-config) >/dev/null 2>&1; then fail "an unknown backend must stop stack.sh"; fi
check "an unknown backend dies" grep -q '^die .*Parasol refused' "$CALLS"

phase unstack
check "unstack stops the unit" called stop_process parasol
check "unstack stops devstack@parasol" called systemctl stop devstack@parasol.service

phase clean
check "clean removes the unit" test ! -e "$UNIT"
check "clean removes the configuration" test ! -e "$PARASOL_CONF_DIR"
check "clean removes the ledger" test ! -e "$DATA_DIR/parasol"
check "clean removes the binary" test ! -e "$PARASOL_BIN_DIR/parasol"
check "clean restores nova.conf" bash -c "! grep -q notification_format '$NOVA_CONF' '$NOVA_CPU_CONF'"
echo "devstack harness: all phases ok"
