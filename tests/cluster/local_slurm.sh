#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for tests: local_slurm.sh start|stop|status.
#
# start   writes slurm.conf (this host as the only node, its CPUs and memory from `slurmd -C`),
#         starts munged (unless one already answers), slurmctld and slurmd, and waits until the
#         node is idle. Running it again while the cluster is up changes nothing.
# stop    cancels the cluster's jobs and stops only the daemons this script started (pid files
#         under the state folder), then removes the /etc/slurm/slurm.conf link it made.
# status  exits 0 when slurmctld and slurmd started by this script are alive and answering.
#
# Needs root, Slurm >= 22.05 and MUNGE (Debian: apt-get install slurm-wlm munge). The state
# folder ($LOCAL_SLURM_DIR, default /tmp/safetyrepro-slurm) holds slurm.conf, logs and pid files.
# Slurm's commands (and the srun steps inside jobs, which do not see SLURM_CONF) read
# /etc/slurm/slurm.conf: the script links it to its own slurm.conf and refuses to run when
# another slurm.conf is there.
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin  # slurmctld, slurmd, munged

STATE=${LOCAL_SLURM_DIR:-/tmp/safetyrepro-slurm}
CONF=$STATE/slurm.conf
SYSTEM_CONF=/etc/slurm/slurm.conf
MUNGE_SOCKET_DIR=/run/munge

say() { echo "local_slurm: $*" >&2; }
die() { say "$*"; exit 1; }

# pid from a pid file, printed only when that process is alive and runs the named program
live_pid() {
    local file=$1 name=$2 pid
    [[ -s $file ]] || return 1
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/comm ]] && [[ $(</proc/"$pid"/comm) == "$name" ]] || return 1
    echo "$pid"
}

munge_answers() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

write_conf() {
    local host node
    host=$(hostname -s)
    node=$(slurmd -C 2>/dev/null | grep '^NodeName=') || die "slurmd -C printed no node line"
    mkdir -p "$STATE/ctld" "$STATE/spool"
    cat >"$CONF.new" <<EOF
# written by tests/cluster/local_slurm.sh: a one-node test cluster, no accounting, no cgroups
ClusterName=safetyrepro-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.new" "$CONF"
}

link_conf() {
    if [[ -L $SYSTEM_CONF && $(readlink "$SYSTEM_CONF") == "$CONF" ]]; then
        return
    fi
    [[ -e $SYSTEM_CONF || -L $SYSTEM_CONF ]] && die "$SYSTEM_CONF exists and is not this script's; not touching it"
    mkdir -p "$(dirname "$SYSTEM_CONF")"
    ln -s "$CONF" "$SYSTEM_CONF"
}

start_munge() {
    if munge_answers; then
        return
    fi
    if [[ ! -s /etc/munge/munge.key ]]; then
        mungekey --create --keyfile=/etc/munge/munge.key
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0600 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 "$MUNGE_SOCKET_DIR"
    runuser -u munge -- munged --pid-file="$MUNGE_SOCKET_DIR/munged.pid"
    for _ in $(seq 50); do
        munge_answers && break
        sleep 0.1
    done
    munge_answers || die "munged started but does not answer (see /var/log/munge/munged.log)"
    cp "$MUNGE_SOCKET_DIR/munged.pid" "$STATE/munged.pid"  # marks munged as started by this script
}

node_state() { sinfo -h -N -o %T 2>/dev/null | head -n1; }

start() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        || die "slurmctld, slurmd or munged is missing (apt-get install slurm-wlm munge)"
    [[ $(id -u) == 0 ]] || die "must run as root"
    mkdir -p "$STATE"
    if ! live_pid "$STATE/slurmctld.pid" slurmctld >/dev/null || ! live_pid "$STATE/slurmd.pid" slurmd >/dev/null; then
        write_conf
    fi
    link_conf
    start_munge
    live_pid "$STATE/slurmctld.pid" slurmctld >/dev/null || slurmctld -f "$CONF"
    live_pid "$STATE/slurmd.pid" slurmd >/dev/null || slurmd -f "$CONF"
    local state=""
    for _ in $(seq 120); do
        state=$(node_state)
        case $state in
            idle | mixed | allocated | completing) say "up: node $(hostname -s) is $state ($CONF)"; return ;;
        esac
        sleep 0.5
    done
    tail -n 20 "$STATE/slurmctld.log" "$STATE/slurmd.log" >&2 || true
    die "node did not become idle within 60 s (state: ${state:-none})"
}

stop_pid_file() {
    local file=$1 name=$2 pid
    if pid=$(live_pid "$file" "$name"); then
        kill "$pid"
        for _ in $(seq 100); do
            [[ -d /proc/$pid ]] || break
            sleep 0.1
        done
        [[ -d /proc/$pid ]] && kill -9 "$pid"
        say "stopped $name (pid $pid)"
    fi
    rm -f "$file"
}

stop() {
    if live_pid "$STATE/slurmctld.pid" slurmctld >/dev/null; then
        squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
        for _ in $(seq 50); do
            [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
            sleep 0.2
        done
    fi
    stop_pid_file "$STATE/slurmd.pid" slurmd
    stop_pid_file "$STATE/slurmctld.pid" slurmctld
    stop_pid_file "$STATE/munged.pid" munged
    if [[ -L $SYSTEM_CONF && $(readlink "$SYSTEM_CONF") == "$CONF" ]]; then
        rm -f "$SYSTEM_CONF"
    fi
}

status() {
    live_pid "$STATE/slurmctld.pid" slurmctld >/dev/null && live_pid "$STATE/slurmd.pid" slurmd >/dev/null \
        && [[ -n $(node_state) ]]
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 start|stop|status" ;;
esac
