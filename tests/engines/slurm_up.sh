#!/usr/bin/env bash
# A real single-node Slurm (Debian bookworm's 22.05: slurmctld + slurmd, munge, slurmdbd + MariaDB accounting,
# fake GPUs through GRES) on 127.0.0.1, no systemd needed. The engine of rlbench's Slurm tests (and CI's).
# Usage (root): SLURM_BASE=DIR WITH_DBD=1 FAKE_GPUS=2 SLURM_PORT=6817 bash slurm_up.sh
#   then export SLURM_CONF=$SLURM_BASE/slurm.conf ; stop with SLURM_BASE=DIR bash slurm_down.sh
# Accounting matters: without slurmdbd a job that dies without writing anything is never seen to end.
# Ports: SLURM_PORT (slurmctld), +1 (slurmd), +2 (slurmdbd), +3 (MariaDB); all on loopback.
set -euo pipefail
B=${SLURM_BASE:-${TMPDIR:-/tmp}/rlbench-slurm}; WITH_DBD=${WITH_DBD:-1}; FAKE_GPUS=${FAKE_GPUS:-2}; CPUS=${SLURM_CPUS:-8}
P=${SLURM_PORT:-6817}; PD=$((P+1)); PDBD=$((P+2)); PSQL=$((P+3))
export DEBIAN_FRONTEND=noninteractive
pk="slurmctld slurmd slurm-client munge"; [ "$WITH_DBD" = 1 ] && pk="$pk slurmdbd mariadb-server"
if ! command -v slurmctld >/dev/null || { [ "$WITH_DBD" = 1 ] && ! command -v slurmdbd >/dev/null; }; then
  # one apt-get at a time with the tests' own installs (tests/conftest.py's APT_LOCK): dpkg refuses a second
  exec 9>>"${TMPDIR:-/tmp}/rlbench-apt.lock"; flock 9
  apt-get update -qq && apt-get install -y -qq --no-install-recommends $pk >/dev/null
  flock -u 9; exec 9>&-
fi
mkdir -p $B/{state,spool,log,run,dev,mysql/tmp,munge}
# --- munge (package postinst creates /etc/munge/munge.key): a munged of this cluster's own, on a socket in $B
# (AuthInfo below), so that two clusters on one machine (two test workers) never share one: stopping one, or
# one failing to start, cannot take the other's authentication down ---
[ -s /etc/munge/munge.key ] || { mungekey --create --force 2>/dev/null || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
M=$B/munge; SOCK=$M/munge.socket; chown munge:munge $M; chmod 755 $M
if ! munge -S $SOCK -n >/dev/null 2>&1; then
  nohup setpriv --reuid=munge --regid=munge --clear-groups /usr/sbin/munged --foreground --socket=$SOCK \
     --pid-file=$M/munged.pid --seed-file=$M/munged.seed --log-file=$M/munged.log >$B/log/munged.out 2>&1 &
  echo $! > $B/run/munged.bgpid
  for i in $(seq 1 40); do munge -S $SOCK -n >/dev/null 2>&1 && break; sleep 0.25; done
fi
munge -S $SOCK -n | unmunge -S $SOCK >/dev/null
# --- fake GPU device files (same major/minor as /dev/null) ---
GRES_LINE=""; GRES_TYPES=""
if [ "$FAKE_GPUS" -gt 0 ]; then
  for i in $(seq 0 $((FAKE_GPUS-1))); do [ -e $B/dev/nvidia$i ] || mknod $B/dev/nvidia$i c 1 3; done
  printf 'AutoDetect=off\nNodeName=localhost Name=gpu Type=fake File=%s/dev/nvidia[0-%d]\n' $B $((FAKE_GPUS-1)) > $B/gres.conf
  GRES_LINE=" Gres=gpu:fake:$FAKE_GPUS"; GRES_TYPES='GresTypes=gpu'
  [ "$WITH_DBD" = 1 ] && GRES_TYPES=$'GresTypes=gpu\nAccountingStorageTRES=gres/gpu'   # this TRES needs slurmdbd (slurmctld is fatal otherwise)
fi
# AccountingStoragePass: the munged socket of connections to slurmdbd (AuthInfo's is for the rest)
if [ "$WITH_DBD" = 1 ]; then ACCT=$(printf 'AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=localhost\nAccountingStoragePort=%s\nAccountingStoragePass=%s' $PDBD $SOCK)
else ACCT='AccountingStorageType=accounting_storage/none'; fi
cat > $B/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$P
SlurmdPort=$PD
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=10,socket=$SOCK
StateSaveLocation=$B/state
SlurmdSpoolDir=$B/spool
SlurmctldPidFile=$B/run/slurmctld.pid
SlurmdPidFile=$B/run/slurmd.pid
SlurmctldLogFile=$B/log/slurmctld.log
SlurmdLogFile=$B/log/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
$ACCT
$GRES_TYPES
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=4000$GRES_LINE State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$B/slurm.conf
if [ "$WITH_DBD" = 1 ]; then
  # temporary tables in $B too (--tmpdir), not in the /tmp every other process shares
  install_db() {
    rm -rf $B/mysql/data
    mariadb-install-db --no-defaults --user=root --datadir=$B/mysql/data --tmpdir=$B/mysql/tmp \
       --auth-root-authentication-method=normal --skip-test-db >>$B/log/mariadb-install.log 2>&1
  }
  if [ ! -d $B/mysql/data/mysql ]; then
    # it once failed here as a second cluster's was installing ('Unknown table mysql.tmp_user_sys'): once more
    install_db || { echo "mariadb-install-db failed; installing again" >&2; install_db; }
  fi
  start_db() {
    nohup /usr/sbin/mariadbd --no-defaults --user=root --datadir=$B/mysql/data --socket=$B/mysql/mysqld.sock \
       --pid-file=$B/run/mariadbd.pid --tmpdir=$B/mysql/tmp --bind-address=127.0.0.1 --port=$PSQL --log-error=$B/log/mariadb.log \
       --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 >/dev/null 2>&1 & echo $! > $B/run/mariadbd.bgpid
    for i in $(seq 1 120); do mariadb --no-defaults -S $B/mysql/mysqld.sock -uroot -e 'select 1' >/dev/null 2>&1 && break; sleep 0.25; done
  }
  start_db
  mariadb --no-defaults -S $B/mysql/mysqld.sock -uroot -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
  cat > $B/slurmdbd.conf <<CONF
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$PDBD
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$PSQL
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
LogFile=$B/log/slurmdbd.log
PidFile=$B/run/slurmdbd.pid
CONF
  chmod 600 $B/slurmdbd.conf
  start_dbd() {
    nohup slurmdbd -D >$B/log/slurmdbd.out 2>&1 & echo $! > $B/run/slurmdbd.bgpid   # finds slurmdbd.conf next to $SLURM_CONF
    for i in $(seq 1 120); do sacctmgr -n show cluster >/dev/null 2>&1 && break
      kill -0 "$(cat $B/run/mariadbd.bgpid)" 2>/dev/null || break; sleep 0.25; done
  }
  start_dbd
  if ! kill -0 "$(cat $B/run/mariadbd.bgpid)" 2>/dev/null; then
    # MariaDB 10.11 once segfaulted on slurmdbd's first schema query (show columns from convert_version_table):
    # start both again on the same data folder (InnoDB recovers it), once
    echo "mariadbd died under slurmdbd's schema setup; starting both again" >&2
    kill "$(cat $B/run/slurmdbd.bgpid)" 2>/dev/null || true; sleep 1
    start_db
    start_dbd
  fi
  sacctmgr -i -n show cluster format=cluster | grep -qw local || sacctmgr -i add cluster local >/dev/null
fi
nohup slurmctld -D >$B/log/slurmctld.out 2>&1 & echo $! > $B/run/slurmctld.bgpid
nohup slurmd -D -N localhost >$B/log/slurmd.out 2>&1 & echo $! > $B/run/slurmd.bgpid   # node name fixed to "localhost" whatever `hostname` says
for i in $(seq 1 120); do
  kill -0 "$(cat $B/run/slurmctld.bgpid)" 2>/dev/null || { echo "slurmctld died:"; tail -3 $B/log/slurmctld.log; exit 1; }
  timeout 5 sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mix|alloc)' && break; sleep 0.25; done
sinfo -o '%P %N %T %c %G'
