# shellcheck shell=bash
# DevStack's functions, stubbed: each records its call in $CALLS (one line each) and does
# what DevStack would do to the files the harness checks, inside $SANDBOX.

record() { printf '%s\n' "$*" >>"$CALLS"; }

die() { record die "$@"; echo "die: $*" >&2; exit 1; }
echo_summary() { record echo_summary "$@"; }
is_service_enabled() { [[ ",$ENABLED_SERVICES," == *",$1,"* ]]; }
enable_service() { record enable_service "$@"; is_service_enabled "$1" || ENABLED_SERVICES+=",$1"; }
disable_service() {
    record disable_service "$@"
    ENABLED_SERVICES=$(tr ',' '\n' <<<"$ENABLED_SERVICES" | grep -vx "$1" | paste -sd, -)
}
# sudo without privileges: the sandbox belongs to the test user, who is $STACK_USER.
sudo() { record sudo "$@"; "$@"; }
# lib/keystone's: the user, in $SERVICE_PROJECT_NAME with the role (default service).
create_service_user() { record create_service_user "$@"; }
iniset() { record iniset "$@"; python3 "$HARNESS_DIR/ini.py" set "$@"; }
inidelete() { record inidelete "$@"; python3 "$HARNESS_DIR/ini.py" delete "$@"; }
# Like DevStack's run_process under systemd: writes devstack@NAME.service and starts it.
run_process() {
    record run_process "$@"
    local unit="$SYSTEMD_DIR/devstack@$1.service"
    printf '[Unit]\nDescription=Devstack %s\n\n[Service]\nExecStart = %s\nUser = %s\n\n[Install]\nWantedBy = multi-user.target\n' \
        "$unit" "$2" "$STACK_USER" >"$unit"
    $SYSTEMCTL enable "devstack@$1.service"
    $SYSTEMCTL start "devstack@$1.service"
}
stop_process() { record stop_process "$@"; $SYSTEMCTL stop "devstack@$1.service"; }
# The rustup installer: "installs" a cargo whose build copies the real parasol binary.
curl() {
    record curl "$@"
    cat <<'SH'
cargo_bin="${PARASOL_CARGO_HOME:?}/bin"
mkdir -p "$cargo_bin"
cat >"$cargo_bin/cargo" <<'CARGO'
#!/bin/bash
printf 'cargo %s\n' "$*" >>"${CALLS:?}"
target=$(sed -n 's/.*--target-dir \([^ ]*\).*/\1/p' <<<"$*")
mkdir -p "$target/release" && cp "$PARASOL_BIN" "$target/release/parasol"
CARGO
chmod +x "$cargo_bin/cargo"
SH
}
sh() { record sh "$@"; PARASOL_CARGO_HOME=$PARASOL_CARGO_HOME bash; }
