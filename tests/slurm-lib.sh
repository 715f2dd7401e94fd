# slurm-lib.sh -- a Slurm cluster of one node for the tests, on loopback.
#
#	. "$GCK_SRCDIR/lib.sh"
#	. "$GCK_SRCDIR/slurm-lib.sh"
#	require_slurm
#	start_slurm || ...
#
# start_slurm starts munged, slurmctld and slurmd, as root, with a
# configuration of their own in $TRASH/slurm: one node, named after this
# host, with two CPUs and two GPUs (gres gpu, device files of their own),
# in two partitions, urgent preempting gck, the default; ports of their
# own; state, spool and logs under $TRASH/slurm.  The system's munged and Slurm, if any, are
# neither used nor touched.  start_slurm_nodes N starts N nodes instead,
# gck1 to gckN, each a slurmd of its own on a port of its own, each with
# two CPUs and two GPUs: a cluster of several nodes on one machine.  SLURM_CONF points the client commands
# (sbatch, squeue, scontrol, scancel) at it.  stop_slurm, which the
# script's test_cleanup calls, cancels what is left and stops the
# daemons.
#
# Processes are tracked by proctrack/linuxproc, which needs neither
# systemd nor cgroups.  There is no accounting database (slurmdbd): the
# end of each run of a job is in the job completion log (jobcomp/filetxt),
# which `sacct -c' reads, and in `scontrol show job'.

munged_pid=
slurmctld_pid=
slurmd_pid=

require_slurm() {
	require_root
	for _c in munged slurmctld slurmd sbatch squeue scontrol scancel sacct; do
		PATH=$PATH:/usr/sbin:/usr/local/sbin command -v $_c >/dev/null ||
		    test_skip_all "$_c not found (scripts/install-deps installs slurm-wlm and munge)"
	done
	PATH=$PATH:/usr/sbin:/usr/local/sbin
}

# A TCP port that nothing listens on, from 20000 up, other than $1.
free_port() {
	while :; do
		_p=$(awk -v s="$(date +%N)" \
		    'BEGIN { srand(s + 0); print 20000 + int(rand() * 40000) }')
		test "$_p" != "$1" || continue
		ss -Htln "sport = :$_p" 2>/dev/null | grep -q . || break
	done
	echo "$_p"
}

# slurm_conf: writes $SLURM_CONF, for the node $slurm_node, or the
# nodes $slurm_nodes on the ports $slurm_ports.
slurm_conf() {
	_s=$TRASH/slurm
	if test -n "$slurm_nodes"; then
		_spool=$_s/spool/%n
		_d=$_s/slurmd.%n
		_nodes=$(echo $slurm_nodes | tr ' ' ,)
		_lines=
		set -- $slurm_ports
		for _n in $slurm_nodes; do
			_lines="$_lines${_lines:+
}NodeName=$_n NodeHostname=$_n NodeAddr=127.0.0.1 Port=$1 CPUs=2 Gres=gpu:2 State=UNKNOWN"
			shift
		done
	else
		_spool=$_s/spool
		_d=$_s/slurmd
		_nodes=$slurm_node
		_lines="NodeName=$slurm_node NodeHostname=$slurm_node NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:2 State=UNKNOWN"
	fi
	cat >"$SLURM_CONF" <<-EOF
	ClusterName=gck
	SlurmctldHost=$slurm_node(127.0.0.1)
	SlurmctldPort=$slurmctld_port
	SlurmdPort=$slurmd_port
	SlurmUser=root
	SlurmdUser=root
	AuthType=auth/munge
	CredType=cred/munge
	# cred_expire: a requeued job waits this long, plus one second,
	# before it may start again (120 seconds by default).
	AuthInfo=socket=$_s/munge/socket,cred_expire=$slurm_cred_expire
	StateSaveLocation=$_s/state
	SlurmdSpoolDir=$_spool
	SlurmctldPidFile=$_s/slurmctld.pid
	SlurmdPidFile=$_d.pid
	SlurmctldLogFile=$_s/slurmctld.log
	SlurmdLogFile=$_d.log
	SlurmctldDebug=info
	SlurmdDebug=info
	PlugStackConfig=$_s/plugstack.conf
	MailProg=/bin/true
	ProctrackType=proctrack/linuxproc
	TaskPlugin=task/none
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	JobCompType=jobcomp/filetxt
	JobCompLoc=$_s/jobcomp
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core
	SchedulerType=sched/builtin
	# a job of the partition urgent preempts one of gck: Slurm sends the
	# job's own --signal at once (else SIGTERM), and requeues the job
	# itself once GraceTime is over
	PreemptType=preempt/partition_prio
	PreemptMode=REQUEUE
	SlurmctldParameters=preempt_send_user_signal
	# the main scheduling loop every second, not every minute, so that
	# a requeued job starts as soon as it may
	SchedulerParameters=sched_interval=1
	MpiDefault=none
	ReturnToService=2
	KillWait=2
	MinJobAge=600
	InactiveLimit=0
	GresTypes=gpu
	$_lines
	PartitionName=gck Nodes=$_nodes Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=60
	PartitionName=urgent Nodes=$_nodes MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
	EOF
	# Two GPUs, device files of their own: Slurm gives a job its GPUs
	# by index (CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS); what stands for
	# them is the stand-in driver's FAKECUDA_DIR/gpus.
	cat >"${SLURM_CONF%/*}/gres.conf" <<-EOF
	AutoDetect=off
	NodeName=$_nodes Name=gpu File=$_s/dev/nvidia[0-1]
	EOF
}

# wait_node_idle [SECONDS]: the node is idle (up to 30 seconds).
wait_node_idle() {
	_i=0
	while test "$(sinfo -h -n "$slurm_node" -o %T 2>/dev/null)" != idle; do
		_i=$((_i + 1))
		if test $_i -gt $((${1:-30} * 10)); then
			echo >&2 "node $slurm_node is not idle:"
			sinfo >&2
			tail -n 20 "$TRASH/slurm/slurmctld.log" \
			    "$TRASH/slurm/slurmd.log" >&2
			return 1
		fi
		sleep 0.1
	done
}

# start_munged: munged and the directories of the cluster; sets
# SLURM_CONF.
start_munged() {
	_s=$TRASH/slurm
	: "${slurm_cred_expire:=5}"
	SLURM_CONF=$_s/slurm.conf
	export SLURM_CONF
	mkdir -p "$_s/munge" "$_s/state" "$_s/spool" "$_s/dev" || return 1
	mknod "$_s/dev/nvidia0" c 195 0 && mknod "$_s/dev/nvidia1" c 195 1 ||
	    return 1
	chmod 755 "$TRASH" "$_s" "$_s/munge" || return 1
	: >"$_s/plugstack.conf"
	dd if=/dev/urandom of="$_s/munge.key" bs=1024 count=1 2>/dev/null &&
	chmod 600 "$_s/munge.key" || return 1
	munged -F -f --socket="$_s/munge/socket" --key-file="$_s/munge.key" \
	    --pid-file="$_s/munge/pid" --seed-file="$_s/munge/seed" \
	    --log-file="$_s/munged.log" >"$_s/munged.out" 2>&1 &
	munged_pid=$!
	wait_for_line "$_s/munged.out" 'Created .* work threads' 10 || {
		cat >&2 "$_s/munged.out"
		return 1
	}
}

start_slurm() {
	_s=$TRASH/slurm
	slurm_node=$(hostname -s)
	slurm_nodes=
	start_munged || return 1
	slurmctld_port=$(free_port 0)
	slurmd_port=$(free_port $slurmctld_port)
	slurm_conf
	slurmctld -D -i >"$_s/slurmctld.out" 2>&1 &
	slurmctld_pid=$!
	slurmd -D -N "$slurm_node" >"$_s/slurmd.out" 2>&1 &
	slurmd_pid=$!
	wait_node_idle 60
}

# start_slurm_nodes N: a cluster of N nodes, gck1 to gckN.  slurmctld
# still runs as this host (SlurmctldHost must be its name).
start_slurm_nodes() {
	_s=$TRASH/slurm
	slurm_node=$(hostname -s)
	slurm_nodes=$(seq -f 'gck%g' "$1" | tr '\n' ' ')
	start_munged || return 1
	slurmctld_port=$(free_port 0)
	slurmd_port=$(free_port $slurmctld_port)
	slurm_ports=
	_used="$slurmctld_port $slurmd_port"
	for _n in $slurm_nodes; do
		while _p=$(free_port $slurmctld_port) &&
		    case " $_used " in *" $_p "*) true ;; *) false ;; esac; do
			:
		done
		_used="$_used $_p"
		slurm_ports="$slurm_ports $_p"
		mkdir -p "$_s/spool/$_n" || return 1
	done
	slurm_conf
	slurmctld -D -i >"$_s/slurmctld.out" 2>&1 &
	slurmctld_pid=$!
	slurmd_pid=
	for _n in $slurm_nodes; do
		slurmd -D -N "$_n" >"$_s/slurmd.$_n.out" 2>&1 &
		slurmd_pid="$slurmd_pid $!"
	done
	_i=0
	while test "$(sinfo -h -p gck -o '%D %T' 2>/dev/null)" != "$1 idle"; do
		_i=$((_i + 1))
		if test $_i -gt 600; then
			echo >&2 "the nodes are not idle:"
			sinfo >&2
			tail -n 20 "$_s/slurmctld.log" "$_s"/slurmd.*.log >&2
			return 1
		fi
		sleep 0.1
	done
}

stop_slurm() {
	if test -n "$slurmctld_pid"; then
		scancel --quiet --user=root 2>/dev/null
		_i=0
		while test -n "$(squeue -h -o %i -t PD,R,CG,S 2>/dev/null)" &&
		    test $_i -lt 50; do
			_i=$((_i + 1))
			sleep 0.1
		done
	fi
	for _p in $slurmd_pid $slurmctld_pid $munged_pid; do
		kill -TERM "$_p" 2>/dev/null
	done
	for _p in $slurmd_pid $slurmctld_pid $munged_pid; do
		wait_child "$_p" 10 >/dev/null 2>&1
	done
	slurmd_pid=
	slurmctld_pid=
	munged_pid=
}

# crash_node: the node fails as a crash does: slurmd and every process
# of the jobs on it (each slurmstepd of ours and what it runs) killed at once,
# then the node set DOWN, as slurmctld sets a node that stopped
# answering; a job on it with --requeue is requeued (NODE_FAIL).
# revive_node starts slurmd again and returns the node to service.
crash_node() {
	# this cluster's: those under the test's subreaper, which they are
	# reparented to
	_ours=" $(proc_descendants "$GCK_REAPER" | tr '\n' ' ') "
	_steps=
	for _p in $(pgrep -x slurmstepd); do
		case $_ours in *" $_p "*) _steps="$_steps $_p" ;; esac
	done
	test -n "$_steps" || { echo >&2 "crash_node: no job step of ours runs"; return 1; }
	_all="$slurmd_pid $_steps"
	for _p in $_steps; do
		_all="$_all $(proc_descendants "$_p" | tr '\n' ' ')"
	done
	# shellcheck disable=SC2086
	kill -STOP $_all 2>/dev/null
	# shellcheck disable=SC2086
	kill -KILL $_all 2>/dev/null
	wait_child "$slurmd_pid" 10 >/dev/null 2>&1
	slurmd_pid=
	scontrol update NodeName="$slurm_node" State=DOWN Reason=crash
}

revive_node() {
	slurmd -D -N "$slurm_node" >>"$TRASH/slurm/slurmd.out" 2>&1 &
	slurmd_pid=$!
	scontrol update NodeName="$slurm_node" State=RESUME &&
	wait_node_idle 60
}

# job_field JOB FIELD: FIELD of `scontrol show job JOB', such as JobState
# or ExitCode.
job_field() {
	scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# wait_job_state JOB STATE [SECONDS]: waits up to SECONDS (default 60)
# for JOB to be in STATE.
wait_job_state() {
	_i=0
	while test "$(job_field "$1" JobState)" != "$2"; do
		_i=$((_i + 1))
		if test $_i -gt $((${3:-60} * 10)); then
			echo >&2 "job $1 is $(job_field "$1" JobState), not $2:"
			scontrol show job "$1" >&2
			return 1
		fi
		sleep 0.1
	done
}

# sbatch_job ARGS...: submits a job, and sets JOB to its ID.
sbatch_job() {
	JOB=$(sbatch --parsable "$@") || return 1
	JOB=${JOB%%;*}
	test -n "$JOB"
}
