#!/usr/bin/env bash
# A one-node SLURM cluster on localhost, for tests: Debian's slurmctld, slurmd and munge,
# started as root without systemd, everything (config, state, logs) in one folder.
#
#   bash scripts/slurm-local.sh start DIR   # then: SLURM_CONF=DIR/slurm.conf srun ...
#   bash scripts/slurm-local.sh stop DIR
#
# Ports 16817/16818 keep it clear of a real cluster's defaults. A cluster left running by
# an earlier run in another folder is stopped first (only one can hold the ports).
set -euo pipefail
cmd="${1:?usage: $0 start|stop DIR}"
dir="$(realpath -m "${2:?usage: $0 start|stop DIR}")"

stop_all() {
  pkill -f "slurmctld -f .*/slurm.conf" 2>/dev/null || true
  pkill -f "slurmd -f .*/slurm.conf" 2>/dev/null || true
  for _ in $(seq 50); do pgrep -f "slurm(ctld|d) -f .*/slurm.conf" >/dev/null || return 0; sleep 0.1; done
  pkill -9 -f "slurm(ctld|d) -f .*/slurm.conf" 2>/dev/null || true
}

case "$cmd" in
  start)
    for tool in munged slurmctld slurmd srun; do
      command -v "$tool" >/dev/null || { echo "slurm-local: $tool is missing (apt-get install slurm-wlm)" >&2; exit 3; }
    done
    stop_all
    mkdir -p "$dir"/{state,spool,log,run}
    cat > "$dir/slurm.conf" <<CONF
ClusterName=peaktest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
# CPUs only: a job that names no memory would otherwise take the node's whole memory,
# and a second worker would wait for the first to end.
SelectTypeParameters=CR_Core
# An srun that stops answering (killed, its host lost) has its job ended after this many
# seconds; without it (the default, 0) the orphaned worker would hold its CPU forever.
InactiveLimit=10
ReturnToService=2
MpiDefault=none
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# Eight CPUs whatever the machine has (config_overrides lets slurmd believe it): tests
# start several workers at once, each a one-CPU job.
SlurmdParameters=config_overrides
NodeName=localhost CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
    if ! pgrep -x munged >/dev/null; then
      mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null || true
      [ -s /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || /usr/sbin/create-munge-key -f; }
      munged --force 2>/dev/null
    fi
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    for _ in $(seq 100); do
      if sinfo -h -o %t 2>/dev/null | grep -q idle; then echo "slurm-local: up, SLURM_CONF=$SLURM_CONF"; exit 0; fi
      sleep 0.2
    done
    echo "slurm-local: the node did not come up; see $dir/log" >&2
    exit 1
    ;;
  stop)
    # Cancel what still runs first: a job whose srun was killed keeps its worker alive
    # under slurmstepd until the controller ends it.
    SLURM_CONF="$dir/slurm.conf" scancel --user="$(id -un)" 2>/dev/null || true
    sleep 0.5
    stop_all
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
