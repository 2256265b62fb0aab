#!/bin/bash
# Runs the operator commands of the docs verbatim, as root, in a sandbox, and checks what each
# block of them does:
#   docs.sh cloud PARASOL_BINARY      README.md, "Replacing nova-scheduler": an existing cloud
#   docs.sh devstack PARASOL_BINARY KEYSTONE_VENV OPENSTACKCLIENT_VENV NOVA_VENV
#                                     devstack/README.md, on a fake DevStack (fake-devstack/)
#                                     with the real Keystone and openstack client of those
#                                     virtualenvs, and Nova's code reading the nova.conf keys
#                                     the plugin sets (tests/devstack.rs caches them)
# Each ```sh block of those docs follows a line `<!-- docs-test: NAME -->`; the scenario below
# runs block NAME, as an operator pasting it into bash (errexit), at its step, prints
# `ran block NAME in N s` (tests/devstack.rs checks that every block of the docs ran) and
# checks what it did.
#
# The sandbox: private mount, PID and network namespaces (so port 8790 and RabbitMQ's 5672
# are the sandbox's own); /etc, /usr/local, /var, /opt, /root and /tmp are overlays whose
# writes land in a tmpfs on /run (itself fresh), and all of it vanishes with the namespaces:
# the real machine is never modified. No systemd runs there: systemctl, journalctl, sudo,
# sudoedit and cargo are stubs (sbin/) installed in /usr/local/sbin, first on the PATH and on
# sudo's secure_path; RabbitMQ is a private broker (fake-devstack/lib/rabbit). What is real and
# what is stubbed is listed in tests/devstack.rs's header.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SCENARIO=${1:?usage: docs.sh cloud|devstack PARASOL_BINARY}
PARASOL_BIN=$(realpath "${2:?usage: docs.sh cloud|devstack PARASOL_BINARY}")
KEYSTONE_VENV=${3:-}
OPENSTACKCLIENT_VENV=${4:-}
NOVA_VENV=${5:-}

fail() { echo "FAIL: $*" >&2; exit 1; }
check() { local what=$1; shift; "$@" >/dev/null || fail "$what"; echo "ok - $what"; }
# eventually WHAT COMMAND...: COMMAND succeeds within 20 s.
eventually() {
    local what=$1 i
    shift
    for ((i = 0; i < 200; i++)); do
        if "$@" >/dev/null 2>&1; then echo "ok - $what"; return 0; fi
        sleep 0.1
    done
    fail "$what (not within 20 s)"
}

# Outside the sandbox: check the tools, then run this script again as PID 1 of new namespaces
# (only there, as PID 1, does it mount anything).
if (($$ != 1)); then
    [[ $(id -u) == 0 ]] || fail "docs.sh runs the docs' root commands in namespaces: run it as root"
    for tool in unshare setpriv useradd getent ip curl jq git python3 rabbitmq-server rabbitmqctl; do
        type -P "$tool" >/dev/null || fail "docs.sh needs $tool on the PATH"
    done
    [[ $SCENARIO == cloud || $SCENARIO == devstack ]] || fail "unknown scenario $SCENARIO"
    if [[ $SCENARIO == devstack ]]; then
        [[ -x $KEYSTONE_VENV/bin/keystone-manage && -x $OPENSTACKCLIENT_VENV/bin/openstack &&
            -x $NOVA_VENV/bin/python ]] ||
            fail "usage: docs.sh devstack PARASOL_BINARY KEYSTONE_VENV OPENSTACKCLIENT_VENV NOVA_VENV (virtualenvs of keystone, python-openstackclient and nova)"
        type -P systemd-analyze >/dev/null || fail "docs.sh devstack needs systemd-analyze on the PATH"
    fi
    # A clean operator environment: nothing of the caller's (PARASOL__*, CARGO_*) leaks in.
    exec unshare --mount --propagation private --pid --fork --mount-proc --net -- \
        env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 TERM=dumb bash "$0" "$@"
fi

enter_sandbox() {
    local dir name
    mount -t tmpfs docs-sandbox /run
    for dir in /etc /usr/local /var /opt /root /tmp; do
        name=${dir//\//_}
        mkdir -p "/run/overlay/upper$name" "/run/overlay/work$name"
        mount -t overlay overlay \
            -o "lowerdir=$dir,upperdir=/run/overlay/upper$name,workdir=/run/overlay/work$name" "$dir"
    done
    ip link set lo up
    getent hosts localhost >/dev/null || echo "127.0.0.1 localhost" >>/etc/hosts
    install -d /usr/local/sbin /run/docs-sandbox
    install -m 0755 "$HERE"/sbin/* /usr/local/sbin/
    # What the cargo stub "builds": the binary tests/devstack.rs built from this tree.
    install -m 0755 "$PARASOL_BIN" /run/docs-sandbox/parasol
    OUT=/run/docs-sandbox/blocks
    mkdir -p "$OUT"
}

# make_checkout DIR: a git clone of Parasol as the operator has it, made from this working
# tree (uncommitted edits included) on the branch local.conf.sample's enable_plugin names
# (whatever branch this tree is on); only what the docs' commands read.
make_checkout() {
    local branch
    branch=$(awk '$1 == "enable_plugin" && $2 == "parasol" { print $4 }' \
        "$REPO/devstack/local.conf.sample")
    mkdir -p "$1"
    cp -r "$REPO/Cargo.toml" "$REPO/Cargo.lock" "$REPO/etc" "$REPO/devstack" "$1/"
    git -C "$1" init -q -b "${branch:-main}"
    git -C "$1" add -A
    git -C "$1" -c user.name=docs-test -c user.email=docs-test@localhost commit -qm "tested tree"
}

# block FILE NAME: the commands of the ```sh block that follows `<!-- docs-test: NAME -->`.
block() {
    awk -v marker="<!-- docs-test: $2 -->" '
        index($0, marker) { armed = 1; next }
        armed && /^[[:space:]]*```sh[[:space:]]*$/ { inside = 1; armed = 0; indent = index($0, "`") - 1; next }
        armed && NF { exit }
        inside && /^[[:space:]]*```[[:space:]]*$/ { found = 1; exit }
        inside { print substr($0, indent + 1) }
        END { exit !found }' "$REPO/$1"
}

# run_block FILE NAME [fails]: runs the block from the current directory with bash -e, as an
# operator pasting it; it must succeed (or, with `fails`, fail). Its output goes to $OUT/NAME,
# each command's after a line `@@ COMMAND` (see output_of).
run_block() {
    local file=$1 name=$2 expect=${3:-succeeds} code status=0 start=$SECONDS
    code=$(block "$file" "$name") || fail "$file has no \`\`\`sh block after <!-- docs-test: $name -->"
    printf '%s\n' "$code" >"$OUT/$name.commands"
    echo "# $file, block $name, in $PWD:"
    sed 's/^/#   $ /' "$OUT/$name.commands"
    cat - "$OUT/$name.commands" >"$OUT/$name.sh" <<'TRACE'
trap 'printf "\n@@ %s\n" "$BASH_COMMAND"' DEBUG
TRACE
    bash -e "$OUT/$name.sh" >"$OUT/$name" 2>&1 </dev/null || status=$?
    awk '{ print "#   | " $0 }' "$OUT/$name"
    if [[ $expect == fails ]]; then
        ((status != 0)) || fail "block $name of $file succeeded but must fail here"
        echo "ok - block $name fails (exit $status) as it must here"
    else
        ((status == 0)) || fail "block $name of $file failed (exit $status)"
        echo "ran block $name in $((SECONDS - start)) s"
    fi
}

# output_of NAME COMMAND: what COMMAND printed when block NAME ran.
output_of() { awk -v marker="@@ $2" '$0 == marker { on = 1; next } /^@@ / { on = 0 } on' "$OUT/$1"; }
ran() { grep -qxF "@@ $2" "$OUT/$1"; }

healthz() { curl -sf localhost:8790/healthz | jq -e "$1"; }
# /healthz: open whatever [auth] says (on DevStack /v1/stats needs a Keystone token).
backend_is() { curl -sf localhost:8790/healthz | jq -e --arg b "$1" '.backend == $b'; }
main_pid() { cat "/run/systemctl-stub/pid/$1.service"; }
mode_owner() { [[ $(stat -c '%a %U %G' "$1") == "$2" ]]; }
journal_has() { journalctl -u "$1" | grep -qF -- "$2"; }
# edit FILE SECTION.KEY=VALUE...: the operator's edit, with sudoedit and an editor that sets keys.
edit() { EDITOR="python3 $HERE/edit-toml.py ${*:2}" sudoedit "$1"; }
scheduler_consumers() { rabbitmqctl -q list_queues name consumers | grep -qxP 'scheduler\t1'; }
not() { ! "$@"; }

# README.md, "Replacing nova-scheduler", "On an existing cloud" and "Switching backends in
# production", on a host where nova-scheduler runs.
scenario_cloud() {
    local doc=README.md pid config=/etc/parasol/parasol.toml
    # shellcheck source=tests/devstack/fake-devstack/lib/rabbit
    source "$HERE/fake-devstack/lib/rabbit"
    start_rabbitmq
    rabbitmq_user nova novapass
    printf '%s\n' '[Unit]' 'Description=OpenStack Compute Scheduler (stand-in)' '[Service]' \
        'ExecStart=/bin/sleep infinity' '[Install]' 'WantedBy=multi-user.target' \
        >/etc/systemd/system/nova-scheduler.service
    systemctl enable --now nova-scheduler >/dev/null
    check "nova-scheduler runs before the swap" systemctl is-active -q nova-scheduler
    make_checkout /root/parasol
    cd /root/parasol

    run_block "$doc" cloud-install
    check "cargo build made target/release/parasol" cmp -s target/release/parasol /run/docs-sandbox/parasol
    check "binary installed 0755 root:root" mode_owner /usr/local/bin/parasol "755 root root"
    check "installed binary is the build" cmp -s /usr/local/bin/parasol target/release/parasol
    check "unit installed 0644 root:root" mode_owner /etc/systemd/system/parasol.service "644 root root"
    check "installed unit is etc/parasol.service" cmp -s /etc/systemd/system/parasol.service etc/parasol.service
    IFS=: read -r _ _ uid _ _ home shell < <(getent passwd parasol) || fail "no user parasol"
    check "parasol is a system user" test "$uid" -lt 1000
    check "parasol's home is /var/lib/parasol" test "$home" = /var/lib/parasol
    check "parasol cannot log in" test "$shell" = /usr/sbin/nologin
    check "group parasol exists" getent group parasol

    # Step 2 reads this host's nova.conf (the sandbox's broker; Keystone is unreachable in the
    # sandbox) and the operator reviews the result with sudoedit (an editor that changes nothing).
    mkdir -p /etc/nova
    printf '%s\n' '[DEFAULT]' 'transport_url = rabbit://nova:novapass@127.0.0.1:5672/' \
        'log_dir = /var/log/nova' '[filter_scheduler]' 'host_subset_size = 2' \
        'enabled_filters = ComputeFilter,NUMATopologyFilter,ServerGroupAffinityFilter,SiteRackFilter' \
        '[placement]' 'auth_type = password' 'auth_url = http://127.0.0.1:5000/v3' \
        'username = nova' 'password = novapass' 'project_name = service' \
        'user_domain_name = Default' 'project_domain_name = Default' >/etc/nova/nova.conf
    chmod 0640 /etc/nova/nova.conf
    EDITOR="python3 $HERE/edit-toml.py" run_block "$doc" cloud-config
    check "config installed 0640 root:parasol" mode_owner "$config" "640 root parasol"
    check "from-nova carried the broker URL" grep -qx 'url = "rabbit://nova:novapass@127.0.0.1:5672/"' "$config"
    check "from-nova turned the RPC server on" grep -qx 'enabled = true' "$config"
    check "from-nova carried host_subset_size" grep -qx 'host_subset_size = 2' "$config"
    check "from-nova carried the Keystone credentials" grep -qx 'password = "novapass"' "$config"
    check "from-nova carried Nova's NUMATopologyFilter" grep -q '"NUMATopologyFilter"' "$config"
    check "from-nova named the filter Parasol lacks" grep -q 'filter SiteRackFilter' \
        "$OUT/cloud-config"
    check "config check accepts it" grep -q "$config: valid (backend filter)" \
        <(output_of cloud-config "parasol config check $config")
    check "the parasol user can read it" setpriv --reuid=parasol --regid=parasol --init-groups test -r "$config"

    run_block "$doc" cloud-swap
    check "nova-scheduler stopped" not systemctl is-active -q nova-scheduler
    check "nova-scheduler disabled" not systemctl is-enabled -q nova-scheduler
    check "parasol enabled" systemctl is-enabled -q parasol
    check "parasol active" systemctl is-active -q parasol
    pid=$(main_pid parasol)
    check "parasol runs as user parasol" test "$(stat -c %U "/proc/$pid")" = parasol
    check "ExecStartPre checked the config" journal_has parasol "$config: valid (backend filter)"
    check "the docs' curl got /healthz: ok, backend filter" jq -e '.status == "ok" and .backend == "filter"' \
        <(output_of cloud-swap "curl -s --retry 10 --retry-connrefused localhost:8790/healthz")
    eventually "/healthz: broker connected" healthz '.broker.connected == true'
    check "/healthz: Placement stale while Keystone is unreachable" healthz '.placement.state == "stale"'
    eventually "Parasol consumes the scheduler topic" scheduler_consumers
    check "the ledger is in /var/lib/parasol, the parasol user's" \
        test "$(stat -c %U:%G /var/lib/parasol/parasol.db)" = parasol:parasol

    # "Switching backends in production": edit [scheduler] backend, then the block.
    edit "$config" scheduler.backend='"apsr"'
    run_block "$doc" cloud-switch
    eventually "reload switched the backend to apsr (/healthz)" backend_is apsr
    check "reload kept the process" test "$(main_pid parasol)" = "$pid"
    check "the journal says so" journal_has parasol "configuration reloaded"
    # A refused file: config check stops the block before the reload; reloading anyway keeps
    # the running configuration.
    edit "$config" scheduler.backend='"nonsense"'
    run_block "$doc" cloud-switch fails
    check "config check refused it, reload not reached" not ran cloud-switch "sudo systemctl reload parasol"
    sudo systemctl reload parasol
    eventually "a reload of the refused file is logged" journal_has parasol "new configuration refused"
    check "the running backend stays apsr" backend_is apsr
    edit "$config" scheduler.backend='"apsr"'

    run_block "$doc" cloud-go-back
    check "parasol stopped" not systemctl is-active -q parasol
    check "parasol's process is gone" not test -e "/proc/$pid"
    check "parasol disabled" not systemctl is-enabled -q parasol
    check "nova-scheduler runs again" systemctl is-active -q nova-scheduler
    check "nova-scheduler enabled again" systemctl is-enabled -q nova-scheduler
    check "nothing answers on 8790" not curl -s localhost:8790/healthz
}

# hosts_status [TOKEN]: the HTTP status of GET /v1/hosts with TOKEN (none if not given).
hosts_status() {
    local header=()
    if (($#)); then header=(-H "X-Auth-Token: $1"); fi
    curl -s -o /dev/null -w '%{http_code}' "${header[@]}" localhost:8790/v1/hosts
}
# openstack_as USER PROJECT ARGS...: the openstack client with DevStack's openrc for USER.
openstack_as() {
    # shellcheck source=tests/devstack/fake-devstack/openrc
    (source /opt/stack/devstack/openrc "$1" "$2" && openstack "${@:3}")
}
token_of() { openstack_as "$1" "$2" token issue -f value -c id; }
# keystone_knows TOKEN: Keystone itself validates TOKEN (with TOKEN as its own credential).
keystone_knows() {
    curl -sf -o /dev/null -H "X-Auth-Token: $1" -H "X-Subject-Token: $1" \
        http://127.0.0.1/identity/v3/auth/tokens
}

# nova_reads CONF: Nova's own options read CONF's [notifications] notification_format as
# versioned and [oslo_messaging_notifications] driver as messagingv2, a driver oslo.messaging has.
nova_reads() {
    "$NOVA_VENV/bin/python" "$HERE/nova-reads.py" "$1" | jq -e '
        .["notifications.notification_format"] == "versioned" and
        .["oslo_messaging_notifications.driver"] == ["messagingv2"] and
        .known_drivers == ["messagingv2"]'
}
# unit_verifies UNIT: systemd's own parser finds nothing wrong in the installed UNIT.
unit_verifies() {
    local problems
    problems=$(systemd-analyze verify --man=no "/etc/systemd/system/$1" 2>&1 | grep -F "$1:") || true
    [[ -z $problems ]] || { echo "$problems" >&2; return 1; }
}

# devstack/README.md, on a fake DevStack (fake-devstack/) whose stack.sh, unstack.sh and
# clean.sh run devstack/plugin.sh as DevStack's do, with Parasol cloned where
# local.conf.sample's enable_plugin points. Keystone and the openstack client are the real
# ones: where DevStack would have installed them, the cached virtualenvs are linked (Keystone's
# at fake-devstack's $KEYSTONE_VENV, `openstack` in /usr/local/bin as DevStack links it).
scenario_devstack() {
    local doc=devstack/README.md backend pid new restack token config=/etc/parasol/parasol.toml
    make_checkout /opt/stack/parasol-src
    mkdir -p /opt/stack/devstack /opt/stack/data
    cp -r "$HERE"/fake-devstack/. /opt/stack/devstack/
    install -D -m 0644 "$HERE/ini.py" /opt/stack/devstack/tools/ini.py
    install -m 0644 "$REPO/tests/keystone/launcher.py" /opt/stack/devstack/tools/keystone-launcher.py
    ln -s "$KEYSTONE_VENV" /opt/stack/data/keystone-venv
    ln -s "$OPENSTACKCLIENT_VENV/bin/openstack" /usr/local/bin/openstack
    cd /opt/stack/devstack

    run_block "$doc" devstack-stack
    backend=$(sed -n 's/^PARASOL_BACKEND=//p' local.conf | tail -n 1)
    echo "# local.conf chose backend $backend"
    check "enable_plugin cloned Parasol" test -f /opt/stack/parasol/devstack/plugin.sh
    check "the plugin installed /usr/local/bin/parasol" cmp -s /usr/local/bin/parasol /run/docs-sandbox/parasol
    check "the config has local.conf's backend" grep -qx "backend = \"$backend\"" "$config"
    check "the config has DevStack's RabbitMQ" grep -qx 'url = "amqp://stackrabbit:secret@127.0.0.1:5672/%2f"' "$config"
    check "devstack@parasol active" systemctl is-active -q devstack@parasol
    check "devstack@keystone active" systemctl is-active -q devstack@keystone
    check "the parasol service user is in Keystone, service role in project service" \
        grep -qx 'service' <(openstack_as admin admin role assignment list \
            --user parasol --user-domain Default --project service --project-domain Default \
            --names -f value -c Role)
    check "devstack@parasol enabled" systemctl is-enabled -q devstack@parasol
    check "n-sch is not run" test ! -e /etc/systemd/system/devstack@n-sch.service
    check "n-cond is run" systemctl is-active -q devstack@n-cond
    for conf in /etc/nova/nova.conf /etc/nova/nova-cpu.conf; do
        check "$conf: versioned notifications" grep -qx 'notification_format = versioned' "$conf"
        check "$conf: messagingv2" grep -qx 'driver = messagingv2' "$conf"
        check "$conf: Nova's own options read both keys so" nova_reads "$conf"
    done
    check "devstack@parasol.service passes systemd-analyze verify" unit_verifies devstack@parasol.service

    # The operator checks once stack.sh is done, which on a real DevStack is long after
    # Parasol started; this fake finishes at once.
    eventually "Parasol answers" curl -sf localhost:8790/healthz
    run_block "$doc" devstack-check
    check "status: active" grep -q 'Active: active (running)' \
        <(output_of devstack-check "sudo systemctl status devstack@parasol")
    check "journal: Parasol ready" grep -q 'Parasol ready' \
        <(output_of devstack-check "journalctl -u devstack@parasol")
    check "/healthz: ok, local.conf's backend" jq -e --arg b "$backend" ".status == \"ok\" and .backend == \$b" \
        <(output_of devstack-check "curl -s localhost:8790/healthz")
    # /v1/hosts: Parasol asks Keystone about each token, with the parasol service user's own.
    # shellcheck disable=SC2016 # the block's command as written, not expanded
    check "/v1/hosts with the block's admin token: the host list" jq -e '.hosts | type == "array"' \
        <(output_of devstack-check 'curl -s -H "X-Auth-Token: $(openstack token issue -f value -c id)" localhost:8790/v1/hosts')
    check "the config asks Keystone" grep -qx 'strategy = "keystone"' "$config"
    token=$(token_of admin admin) || fail "openstack token issue failed for admin"
    check "Keystone issued and knows the admin's token" keystone_knows "$token"
    check "/v1/hosts with the admin's token: 200" test "$(hosts_status "$token")" = 200
    check "/v1/hosts with a token Keystone never issued: 401" \
        test "$(hosts_status gAAAAABrB9oSO_hwhj7-not-a-real-fernet-token)" = 401
    check "/v1/hosts without a token: 401" test "$(hosts_status)" = 401
    token=$(token_of demo demo) || fail "openstack token issue failed for demo"
    check "/v1/hosts with the demo user's token (member, not admin): 403" \
        test "$(hosts_status "$token")" = 403
    eventually "/healthz: broker connected" healthz '.broker.connected == true'
    eventually "Parasol consumes the scheduler topic" scheduler_consumers

    # "Switching backends" on a running DevStack: the block edits with sudoedit, to a backend
    # that neither local.conf nor the re-stack block below chooses.
    pid=$(main_pid devstack@parasol)
    restack=$(block "$doc" devstack-restack | sed -n 's/.*PARASOL_BACKEND=\([a-z]*\).*/\1/p')
    [[ -n $restack ]] || fail "the devstack-restack block sets no PARASOL_BACKEND"
    for new in filter caching asc apsr; do
        [[ $new == "$backend" || $new == "$restack" ]] || break
    done
    EDITOR="python3 $HERE/edit-toml.py scheduler.backend=\"$new\"" run_block "$doc" devstack-reload
    eventually "reload switched the backend to $new (/healthz)" backend_is "$new"
    check "reload kept the process" test "$(main_pid devstack@parasol)" = "$pid"
    check "the journal says so" journal_has devstack@parasol "configuration reloaded"

    # ... or by re-stacking with another PARASOL_BACKEND.
    run_block "$doc" devstack-restack
    new=$(sed -n 's/^PARASOL_BACKEND=//p' local.conf | tail -n 1)
    check "local.conf's backend is the block's" test "$new" = "$restack"
    check "the config has it" grep -qx "backend = \"$new\"" "$config"
    eventually "Parasol runs it (/healthz)" backend_is "$new"
    check "re-stacking restarted Parasol" test "$(main_pid devstack@parasol)" != "$pid"
    check "unstack stopped the old process" not test -e "/proc/$pid"

    pid=$(main_pid devstack@parasol)
    run_block "$doc" devstack-clean
    check "Parasol stopped" not test -e "/proc/$pid"
    check "devstack@parasol inactive" not systemctl is-active -q devstack@parasol
    check "the unit is removed" test ! -e /etc/systemd/system/devstack@parasol.service
    check "/etc/parasol is removed" test ! -e /etc/parasol
    check "the ledger is removed" test ! -e /opt/stack/data/parasol
    check "the binary is removed" test ! -e /usr/local/bin/parasol
    check "nova.conf keys are removed" not grep -q 'notification_format' /etc/nova/nova.conf /etc/nova/nova-cpu.conf
}

enter_sandbox
"scenario_$SCENARIO"
echo "docs sandbox: $SCENARIO ok"
