# Shared settings of the wattsched test cluster scripts (sourced by up, down, status).
# Everything lives under $WS_TC_DIR; nothing outside it is written except the network
# namespaces, veths and the bridge named below, all removed by `down`.
set -euo pipefail

WS_TC_DIR=${WS_TC_DIR:-/tmp/wattsched-testcluster}
WS_TC_NODES=${WS_TC_NODES:-4}
WS_TC_CORES=${WS_TC_CORES:-2}
WS_TC_SUBNET=${WS_TC_SUBNET:-10.199.7}      # /24 used only inside this machine's own namespaces
WS_TC_BRIDGE=${WS_TC_BRIDGE:-wsbr0}
WS_TC_PREFIX=${WS_TC_PREFIX:-wsn}           # node names: wsn1, wsn2, ...
WS_TC_CTLD_PORT=${WS_TC_CTLD_PORT:-6817}
WS_TC_SLURMD_PORT=${WS_TC_SLURMD_PORT:-6818}
WS_TC_GATE=${WS_TC_GATE:-none}              # none | lua: install deploy/slurm/job_submit.lua
WS_TC_TELEMETRY=${WS_TC_TELEMETRY:-1}       # 1: fake sysfs + power emulator, node exporters, agents, prometheus
WS_TC_PYTHON=${WS_TC_PYTHON:-python3}       # a Python that imports wattsched (for the agents and fake sysfs)
WS_TC_PROM_PORT=${WS_TC_PROM_PORT:-9090}    # prometheus on 127.0.0.1
WS_TC_DAEMON_PORT=${WS_TC_DAEMON_PORT:-9817} # where prometheus scrapes the wattsched daemon
WS_TC_IDLE_W=${WS_TC_IDLE_W:-100}           # emulated node power: idle, and busy without a declared power
WS_TC_BUSY_W=${WS_TC_BUSY_W:-250}
WS_TC_ACCOUNTING=${WS_TC_ACCOUNTING:-0}     # 1: slurmdbd + MariaDB (sacct) and slurmrestd (JWT); see up --help
WS_TC_DBD_PORT=${WS_TC_DBD_PORT:-6819}      # slurmdbd
WS_TC_REST_PORT=${WS_TC_REST_PORT:-6820}    # slurmrestd on 127.0.0.1
WS_TC_ACCT_USERS=${WS_TC_ACCT_USERS:-root}  # users given an association (sacct --json names only those)

WS_TC_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WS_TC_HOST_ADDR=$WS_TC_SUBNET.1

node_name() { echo "$WS_TC_PREFIX$1"; }
node_addr() { echo "$WS_TC_SUBNET.$((10 + $1))"; }
node_ns() { echo "wattsched-$WS_TC_PREFIX$1"; }

# Node count recorded by `up`, so `down` and `status` work without the same environment.
recorded_nodes() {
    if [ -f "$WS_TC_DIR/nodes" ]; then cat "$WS_TC_DIR/nodes"; else echo "$WS_TC_NODES"; fi
}
# The rest of the settings `up` used (bridge, subnet, names), likewise (for down and status).
load_settings() {
    if [ -f "$WS_TC_DIR/etc/settings.env" ]; then
        # shellcheck disable=SC1091
        source "$WS_TC_DIR/etc/settings.env"
    fi
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# start_bg PIDFILE LOG CMD...: start CMD in the background, detached, unless PIDFILE's process runs
start_bg() {
    local pidfile=$1 log=$2
    shift 2
    pid_alive "$pidfile" && return 0
    setsid "$@" >>"$log" 2>&1 < /dev/null &
    echo $! > "$pidfile"
}

stop_pidfile() {  # stop_pidfile FILE: TERM, wait up to 5 s, then KILL
    local f=$1 pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        # gone for good (its ports free) before the next `up` starts its successor
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$f"
}

say() { echo "testcluster: $*" >&2; }
die() { say "$*"; exit 1; }
