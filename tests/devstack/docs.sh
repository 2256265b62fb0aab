#!/bin/bash
# Runs the operator commands of the docs verbatim, as root, in a sandbox, and checks what each
# block of them does:
#   docs.sh cloud PARASOL_BINARY      README.md, "Replacing nova-scheduler": an existing cloud
#   docs.sh devstack PARASOL_BINARY   devstack/README.md, on a fake DevStack (fake-devstack/)
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
# sudo's secure_path; RabbitMQ is a private broker (fake-devstack/lib/rabbit).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SCENARIO=${1:?usage: docs.sh cloud|devstack PARASOL_BINARY}
PARASOL_BIN=$(realpath "${2:?usage: docs.sh cloud|devstack PARASOL_BINARY}")

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
# tree (uncommitted edits included) on this branch; only what the docs' commands read.
make_checkout() {
    local branch
    branch=$(git -C "$REPO" branch --show-current 2>/dev/null || true)
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
        'enabled_filters = ComputeFilter,NUMATopologyFilter,ServerGroupAffinityFilter' \
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
    check "from-nova named the filter Parasol lacks" grep -q 'filter NUMATopologyFilter' \
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

# devstack/README.md, on a fake DevStack (fake-devstack/) whose stack.sh, unstack.sh and
# clean.sh run devstack/plugin.sh as DevStack's do, with Parasol cloned where
# local.conf.sample's enable_plugin points.
scenario_devstack() {
    local doc=devstack/README.md backend pid new restack config=/etc/parasol/parasol.toml
    make_checkout /opt/stack/parasol-src
    mkdir -p /opt/stack/devstack
    cp -r "$HERE"/fake-devstack/. /opt/stack/devstack/
    install -D -m 0644 "$HERE/ini.py" /opt/stack/devstack/tools/ini.py
    cd /opt/stack/devstack

    run_block "$doc" devstack-stack
    backend=$(sed -n 's/^PARASOL_BACKEND=//p' local.conf | tail -n 1)
    echo "# local.conf chose backend $backend"
    check "enable_plugin cloned Parasol" test -f /opt/stack/parasol/devstack/plugin.sh
    check "the plugin installed /usr/local/bin/parasol" cmp -s /usr/local/bin/parasol /run/docs-sandbox/parasol
    check "the config has local.conf's backend" grep -qx "backend = \"$backend\"" "$config"
    check "the config has DevStack's RabbitMQ" grep -qx 'url = "amqp://stackrabbit:secret@127.0.0.1:5672/%2f"' "$config"
    check "devstack@parasol active" systemctl is-active -q devstack@parasol
    check "devstack@parasol enabled" systemctl is-enabled -q devstack@parasol
    check "n-sch is not run" test ! -e /etc/systemd/system/devstack@n-sch.service
    check "n-cond is run" systemctl is-active -q devstack@n-cond
    for conf in /etc/nova/nova.conf /etc/nova/nova-cpu.conf; do
        check "$conf: versioned notifications" grep -qx 'notification_format = versioned' "$conf"
        check "$conf: messagingv2" grep -qx 'driver = messagingv2' "$conf"
    done

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
    # shellcheck disable=SC2016 # the block's command as written, not expanded
    check "/v1/hosts with the block's token: 503 naming Keystone, which the fake lacks" \
        jq -e '.error.class == "ServiceUnavailable" and (.error.message | test("Keystone is unreachable"))' \
        <(output_of devstack-check 'curl -s -H "X-Auth-Token: $(openstack token issue -f value -c id)" localhost:8790/v1/hosts')
    check "/v1/hosts without a token: 401" test "$(curl -s -o /dev/null -w '%{http_code}' localhost:8790/v1/hosts)" = 401
    check "the config asks Keystone" grep -qx 'strategy = "keystone"' "$config"
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
