# Shared settings of the wattsched docker cluster scripts (sourced by build-image, up, down).
# Everything dockerd and the cluster write lives under $WS_DK_DIR; `down` removes it and
# puts the host's firewall and sysctl state back as `up` found it.
set -euo pipefail

WS_DK_DIR=${WS_DK_DIR:-/tmp/wattsched-docker}
WS_DK_SUITE=${WS_DK_SUITE:-bookworm}          # Debian suite of the image (bookworm: Slurm 22.05.8)
WS_DK_IMAGE=${WS_DK_IMAGE:-wattsched-slurm:$WS_DK_SUITE}
WS_DK_SUBNET=${WS_DK_SUBNET:-10.199.15}       # /24 of the compose network; not the namespace cluster's 10.199.7
WS_DK_PROJECT=${WS_DK_PROJECT:-wattsched}     # docker-compose project name
WS_DK_REST_PORT=${WS_DK_REST_PORT:-6820}
WS_DK_METRICS_PORT=${WS_DK_METRICS_PORT:-9817}
# Debian's docker.io client and docker-compose v1, by explicit path: another `docker` earlier
# on PATH (a newer CLI) may not speak to Debian's 20.10 daemon the same way.
WS_DK_DOCKER=${WS_DK_DOCKER:-/usr/bin/docker}
WS_DK_COMPOSE=${WS_DK_COMPOSE:-/usr/bin/docker-compose}
WS_DK_DOCKERD=${WS_DK_DOCKERD:-/usr/sbin/dockerd}

WS_DK_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WS_DK_REPO=$(cd "$WS_DK_SRC/../.." && pwd)
WS_DK_SOCKET=$WS_DK_DIR/docker.sock
WS_DK_STATE=$WS_DK_DIR/host-state            # what `up` found: iptables, nft, ip_forward
export DOCKER_HOST=${WS_DK_DOCKER_HOST:-unix://$WS_DK_SOCKET}

say() { echo "docker-cluster: $*" >&2; }
die() { say "$*"; exit 1; }
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

docker() { "$WS_DK_DOCKER" "$@"; }
compose() {
    WS_DK_IMAGE=$WS_DK_IMAGE WS_DK_DIR=$WS_DK_DIR WS_DK_SUBNET=$WS_DK_SUBNET WS_DK_REPO=$WS_DK_REPO \
    WS_DK_REST_PORT=$WS_DK_REST_PORT WS_DK_METRICS_PORT=$WS_DK_METRICS_PORT \
        "$WS_DK_COMPOSE" --project-name "$WS_DK_PROJECT" --project-directory "$WS_DK_SRC" \
        -f "$WS_DK_SRC/docker-compose.yml" "$@"
}

# The Debian mirror apt already uses (first deb.debian.org-style URI for the main archive).
apt_mirror() {
    if [ -n "${WS_DK_MIRROR:-}" ]; then echo "$WS_DK_MIRROR"; return; fi
    local m
    m=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | grep -oE 'https?://[^ ]*/debian/?' | grep -v -- '-security' | head -n1 || true)
    echo "${m:-http://deb.debian.org/debian}"
}

# Save what dockerd could change on the host, to compare and restore on `down`.
save_host_state() {
    local dir=$1
    mkdir -p "$dir"
    iptables-save > "$dir/iptables.rules" 2>/dev/null || : > "$dir/iptables.rules"
    ip6tables-save > "$dir/ip6tables.rules" 2>/dev/null || : > "$dir/ip6tables.rules"
    nft list ruleset > "$dir/nft.ruleset" 2>/dev/null || : > "$dir/nft.ruleset"
    sysctl -n net.ipv4.ip_forward > "$dir/ip_forward"
}

# Start dockerd on our own socket, data root and exec root unless one answers there already.
# It never touches the host firewall or sysctls (--iptables=false --ip-forward=false
# --ip-masq=false, no default bridge): the compose network is internal, containers talk only
# to each other and to this host over the network's bridge.
ensure_dockerd() {
    if docker version >/dev/null 2>&1; then return 0; fi
    if [ "${DOCKER_HOST}" != "unix://$WS_DK_SOCKET" ]; then
        die "DOCKER_HOST=$DOCKER_HOST does not answer; unset WS_DK_DOCKER_HOST to let up start its own dockerd"
    fi
    [ "$(id -u)" -eq 0 ] || die "must run as root to start dockerd"
    [ -x "$WS_DK_DOCKERD" ] || die "no $WS_DK_DOCKERD: install Debian's docker.io (scripts/install-system-deps)"
    mkdir -p "$WS_DK_DIR"/{data,exec,log}
    chmod 711 "$WS_DK_DIR"
    [ -f "$WS_DK_STATE/ip_forward" ] || save_host_state "$WS_DK_STATE"
    # containerd comes with docker.io; dockerd starts its own (managed) containerd under exec-root
    setsid "$WS_DK_DOCKERD" --data-root "$WS_DK_DIR/data" --exec-root "$WS_DK_DIR/exec" \
        --pidfile "$WS_DK_DIR/dockerd.pid" -H "unix://$WS_DK_SOCKET" --bridge=none \
        --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
        --userland-proxy=false --log-level=warn \
        >>"$WS_DK_DIR/log/dockerd.log" 2>&1 < /dev/null &
    local i
    for i in $(seq 1 60); do
        docker version >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    tail -n 20 "$WS_DK_DIR/log/dockerd.log" >&2 || true
    die "dockerd did not answer on $WS_DK_SOCKET within 30 s (log: $WS_DK_DIR/log/dockerd.log)"
}

# The interpreter prefix the checkout's venv was made from, mounted into the wattsched
# service at the same path (a Debian /usr prefix is the image's own python3: mount an empty dir;
# the venv then needs the same Python minor version as the image's, 3.11 on bookworm).
python_prefix_env() {
    local prefix
    prefix=$("$WS_DK_REPO/.venv/bin/python" -c 'import sys; print(sys.base_prefix)' 2>/dev/null || true)
    mkdir -p "$WS_DK_DIR/empty"
    case "$prefix" in
        ""|/usr|/) WS_DK_PY_PREFIX=$WS_DK_DIR/empty; WS_DK_PY_PREFIX_MOUNT=/opt/wattsched-docker/empty ;;
        *) WS_DK_PY_PREFIX=$prefix; WS_DK_PY_PREFIX_MOUNT=$prefix ;;
    esac
    export WS_DK_PY_PREFIX WS_DK_PY_PREFIX_MOUNT
}
