#!/usr/bin/env bash
# A throwaway Slurm cluster on this host, from Debian's packages, for the
# Slurm backend's end-to-end test: munged, slurmctld, two slurmd ("fa" with
# two typed a100 GPUs, "fb" with one t4; the GPUs are character devices made
# with mknod, so Slurm binds them like real ones) and slurmrestd with JWT.
#
#   slurm_cluster.sh start DIR CTLD_PORT REST_PORT   -> prints "ready" when both nodes are idle
#   slurm_cluster.sh stop DIR                         -> stops everything started in DIR
#
# Needs root (mknod, the service users munge and slurm). Everything lives in
# DIR; every daemon's pid is in DIR/*.pid, so stop ends exactly those.
set -euo pipefail
trap 'echo "slurm_cluster.sh: line $LINENO failed: $BASH_COMMAND" >&2' ERR

cmd=$1
dir=$2

stop() {
  for pidfile in "$dir"/slurmrestd.pid "$dir"/slurmd-fa.pid "$dir"/slurmd-fb.pid \
                 "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    [ -n "$pid" ] || continue
    kill -TERM "$pid" 2>/dev/null || true
  done
  # Give them a moment, then make sure.
  for _ in $(seq 1 50); do
    alive=0
    for pidfile in "$dir"/*.pid; do
      [ -f "$pidfile" ] || continue
      pid=$(cat "$pidfile" 2>/dev/null || true)
      if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then alive=1; fi
    done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for pidfile in "$dir"/*.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  done
  # What the daemons leave: slurmstepd and the job's processes (launchers,
  # ranks). They all carry this cluster's SLURM_CONF in their environment.
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [ "$pid" = "$$" ] && continue
    if tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$dir/slurm.conf"; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi

ctld_port=$3
rest_port=$4
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 2; }

mkdir -p "$dir"/{state,spool-fa,spool-fb,dev,munge,log}
chmod 755 "$dir"
chown munge:munge "$dir/munge"
chmod 700 "$dir/munge"
mknod -m 666 "$dir/dev/fa-gpu0" c 1 3
mknod -m 666 "$dir/dev/fa-gpu1" c 1 3
mknod -m 666 "$dir/dev/fb-gpu0" c 1 3

# munged with its own key and socket.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chown munge:munge "$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
runuser -u munge -- /usr/sbin/munged --force \
  --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
  --seed-file="$dir/munge/munged.seed"
# Generous waits: a loaded 2-core host starts daemons slowly.
for _ in $(seq 1 400); do
  [ -S "$dir/munge/munge.sock" ] && [ -s "$dir/munge/munged.pid" ] && break
  sleep 0.05
done
cp "$dir/munge/munged.pid" "$dir/munged.pid"
chmod 755 "$dir/munge"  # clients must reach the socket

dd if=/dev/urandom of="$dir/jwt.key" bs=32 count=1 status=none
chmod 600 "$dir/jwt.key"

cat > "$dir/slurm.conf" <<CONF
ClusterName=tessera
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$dir/jwt.key
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
ReturnToService=1
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmdTimeout=30
InactiveLimit=0
KillWait=2
MinJobAge=300
NodeName=fa NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((ctld_port + 1)) CPUs=2 Gres=gpu:a100:2 State=UNKNOWN
NodeName=fb NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((ctld_port + 2)) CPUs=2 Gres=gpu:t4:1 State=UNKNOWN
PartitionName=gpu Nodes=fa,fb Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
cat > "$dir/gres.conf" <<CONF
NodeName=fa Name=gpu Type=a100 File=$dir/dev/fa-gpu[0-1]
NodeName=fb Name=gpu Type=t4 File=$dir/dev/fb-gpu0
CONF
chmod 644 "$dir/slurm.conf" "$dir/gres.conf"
export SLURM_CONF="$dir/slurm.conf"

/usr/sbin/slurmctld -i
/usr/sbin/slurmd -N fa
/usr/sbin/slurmd -N fb

# A daemon that exited (a port taken between the caller's check and its bind,
# most often) ends the wait at once, naming it.
exited() {
  for name in "$@"; do
    pid=$(cat "$dir/$name.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "$name exited: see $dir/log/$name.log" >&2
      return 0
    fi
  done
  return 1
}

# Both nodes idle.
states=""
for _ in $(seq 1 400); do
  if exited slurmctld slurmd-fa slurmd-fb; then exit 1; fi
  states=$(sinfo -h -N -o "%N %T" 2>/dev/null | sort -u | tr '\n' ' ' || true)
  if [[ "$states" == *"fa idle"* && "$states" == *"fb idle"* ]]; then break; fi
  sleep 0.1
done
if [[ "$states" != *"fa idle"* || "$states" != *"fb idle"* ]]; then
  echo "nodes not idle after 40 s: $states" >&2
  exit 1
fi

# slurmrestd refuses root and SlurmUser: it runs as the "slurm" service user.
token=$(scontrol token username=root lifespan=86400 | sed 's/^SLURM_JWT=//')
printf '%s' "$token" > "$dir/jwt.token"
chmod 600 "$dir/jwt.token"
runuser -u slurm -- env SLURM_CONF="$dir/slurm.conf" SLURM_JWT=daemon \
  /usr/sbin/slurmrestd -s openapi/v0.0.38 -a rest_auth/jwt "127.0.0.1:$rest_port" \
  > "$dir/log/slurmrestd.log" 2>&1 &
echo $! > "$dir/slurmrestd.pid"
for _ in $(seq 1 400); do
  if exited slurmrestd; then exit 1; fi
  if curl -sf -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $token" \
      "http://127.0.0.1:$rest_port/slurm/v0.0.38/ping" >/dev/null 2>&1; then
    echo ready
    exit 0
  fi
  sleep 0.1
done
echo "slurmrestd did not answer" >&2
exit 1
