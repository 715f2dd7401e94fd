#!/bin/sh
test_description='what a user is told, in one line: a thread for a pid, no root, another user, System V shared memory, a file gone'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_sshd
for _c in setpriv unshare; do
	command -v $_c >/dev/null || test_skip_all "$_c not found"
done

GCKSEND=$GCK_BINDIR/send/gpusend
GCKRECV=$GCK_BINDIR/recv/gpurecv
RPATH="GCK_RUNDIR=$TRASH/run TMPDIR=$TRASH/rtmp $GCKRECV"
# A user other than root, and root without CAP_SYS_RESOURCE.
NOBODY="setpriv --reuid 65534 --regid 65534 --clear-groups"
NORES="setpriv --bounding-set -sys_resource --inh-caps -sys_resource"

started=
sshd_pid=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	test -n "$sshd_pid" && kill_tree $sshd_pid >/dev/null 2>&1
	:
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
}

# start_with WRAPPER NAME ARGS: start, the workload run by WRAPPER.
start_with() {
	_w=$WORKLOAD
	WORKLOAD=$1
	shift
	start "$@"
	_st=$?
	WORKLOAD=$_w
	return $_st
}

# gsend ARGS: gpusend to the sshd, as root@127.0.0.1 with our key.
gsend() {
	HOME=$TRASH/home "$GCKSEND" -P "$port" -i "$TRASH/userkey" \
	    -o IdentityAgent=none -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "$RPATH" "$@"
}

# said ERR PATTERN: ERR holds one line, and it matches PATTERN.
said() {
	cat >&2 "$1"
	test_line_count "$1" 1 &&
	test_grep "$2" "$1"
}

# nothing_left: no scratch file of ours or of gpurecv's.
nothing_left() {
	test -z "$(ls -A "$TMPDIR")" &&
	test -z "$(ls -A "$TRASH/rtmp")" &&
	test -z "$(ls -A "$TRASH/run" 2>/dev/null)"
}

# Another user's job keeps its status file in nobody/.
chmod 711 "$TRASH" &&
mkdir home rtmp nobody &&
chown 65534:65534 nobody &&
cat >ipcjob <<EOF &&
#!/bin/sh
exec unshare --ipc "$WORKLOAD" "\$@"
EOF
cat >nobodyjob <<EOF &&
#!/bin/sh
exec $NOBODY "$WORKLOAD" "\$@"
EOF
chmod +x ipcjob nobodyjob

test_expect_success 'sshd on 127.0.0.1, and a job' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	start_sshd &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts &&
	start job -m 16 &&
	JOB=$WPID &&
	JOBSTATUS=$WSTATUS &&
	TID=$(ls /proc/$JOB/task | grep -v "^$JOB\$" | head -n 1) &&
	test -n "$TID" &&
	verify_workload $JOB
'

test_expect_success 'gpuckpt -p TID: it is a thread, give the process ID' '
	test_status 1 "$GCKPT" -p $TID >job.gck 2>err &&
	test_must_be_empty job.gck &&
	said err "^gpuckpt: cannot checkpoint pid $TID: it is a thread of process $JOB (.workload.); give the process ID: -p $JOB\$" &&
	nothing_left &&
	verify_workload $JOB $JOBSTATUS
'

test_expect_success 'gpusend -p TID: the same, before connecting' '
	test_status 1 gsend -p $TID root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	said err "^gpusend: local: cannot checkpoint pid $TID: it is a thread of process $JOB (.workload.); give the process ID: -p $JOB\$" &&
	nothing_left &&
	verify_workload $JOB $JOBSTATUS
'

test_expect_success 'gpuckpt not as root: criu needs root' '
	test_status 1 $NOBODY "$GCKPT" -p $JOB >job.gck 2>err &&
	test_must_be_empty job.gck &&
	said err "^gpuckpt: cannot checkpoint pid $JOB: criu needs root (this gpuckpt runs as uid 65534 without CAP_SYS_ADMIN): run it as root\$" &&
	nothing_left &&
	verify_workload $JOB $JOBSTATUS
'

test_expect_success 'gpuckpt as root without CAP_SYS_PTRACE: criu needs it' '
	test_status 1 setpriv --bounding-set -sys_ptrace --inh-caps -sys_ptrace \
	    "$GCKPT" -p $JOB >job.gck 2>err &&
	test_must_be_empty job.gck &&
	said err "^gpuckpt: cannot checkpoint pid $JOB: criu needs root.s CAP_SYS_PTRACE, which this gpuckpt lacks: run it with all of root.s capabilities, not in a container or under a setpriv or capsh that drops them\$" &&
	nothing_left &&
	verify_workload $JOB $JOBSTATUS
'

test_expect_success 'criu run without CAP_SYS_ADMIN: its own message, in our words' '
	cat >nocap <<-EOF &&
	#!/bin/sh
	exec setpriv --bounding-set -sys_admin,-checkpoint_restore \
	    --inh-caps -sys_admin,-checkpoint_restore "$CRIU" "\$@"
	EOF
	chmod +x nocap &&
	test_status 1 env GCK_CRIU="$TRASH/nocap" "$GCKPT" -p $JOB \
	    >job.gck 2>err &&
	test_must_be_empty job.gck &&
	said err "^gpuckpt: criu dump of pid $JOB failed: criu ran without CAP_SYS_ADMIN, which it needs (it must run as root, with root.s capabilities, not in a container or under a setpriv or capsh that drops them); process tree $JOB left running\$" &&
	nothing_left &&
	verify_workload $JOB $JOBSTATUS
'

test_expect_success 'gpurestore not as root: criu needs root' '
	"$GCKPT" -R -p $JOB -o img.gck &&
	verify_workload $JOB $JOBSTATUS &&
	test_status 1 $NOBODY "$GCKRESTORE" <img.gck >out 2>err &&
	test_must_be_empty out &&
	said err "^gpurestore: cannot restore: criu needs root (this gpurestore runs as uid 65534 without CAP_SYS_ADMIN): run it as root\$" &&
	nothing_left &&
	verify_workload $JOB $JOBSTATUS
'

test_expect_success 'gpusend -p not as root: criu needs root, before connecting' '
	test_status 1 $NOBODY env HOME=/nonexistent "$GCKSEND" -P "$port" \
	    -p $JOB root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	said err "^gpusend: local: cannot checkpoint pid $JOB: criu needs root (this gpusend runs as uid 65534 without CAP_SYS_ADMIN): run it as root\$" &&
	nothing_left &&
	verify_workload $JOB $JOBSTATUS
'

test_expect_success 'a gpurecv not run as root: it says so, and the tree runs on' '
	RPATH="$NOBODY $GCKRECV" &&
	test_status 1 gsend -p $JOB root@127.0.0.1 >out 2>err &&
	RPATH="GCK_RUNDIR=$TRASH/run TMPDIR=$TRASH/rtmp $GCKRECV" &&
	test_must_be_empty out &&
	said err "^gpusend: remote 127.0.0.1: cannot restore: criu needs root (this gpurecv runs as uid 65534 without CAP_SYS_ADMIN): have gpusend log in there as root; process tree $JOB left running\$" &&
	nothing_left &&
	verify_workload $JOB $JOBSTATUS
'

test_expect_success 'another user'\''s job, root without CAP_SYS_RESOURCE' '
	start_with "$TRASH/nobodyjob" nobody/job -m 16 &&
	test "$(stat -c %u /proc/$WPID)" = 65534 &&
	test_status 1 $NORES "$GCKPT" -p $WPID >job.gck 2>err &&
	test_must_be_empty job.gck &&
	said err "^gpuckpt: cannot checkpoint pid $WPID: process $WPID (.workload.) runs as uid 65534: criu needs CAP_SYS_RESOURCE to read another user.s resource limits, and this gpuckpt lacks it: run it with CAP_SYS_RESOURCE, not in a container or under a setpriv or capsh that drops it\$" &&
	nothing_left &&
	verify_workload $WPID
'

test_expect_success 'System V shared memory in the host'\''s IPC namespace: start the job with unshare --ipc' '
	start shm -m 16 -s 256 &&
	test_status 1 "$GCKPT" -p $WPID >job.gck 2>err &&
	test_must_be_empty job.gck &&
	said err "^gpuckpt: criu dump of pid $WPID failed: a process of the tree has System V shared memory attached, which criu checkpoints only when the tree has an IPC namespace of its own (start the job with .unshare --ipc.); process tree $WPID left running\$" &&
	nothing_left &&
	verify_workload $WPID
'

test_expect_success 'a job started with unshare --ipc is checkpointed and restored' '
	start_with "$TRASH/ipcjob" ipc -m 16 -s 256 &&
	test "$(readlink /proc/$WPID/ns/ipc)" != "$(readlink /proc/self/ns/ipc)" &&
	verify_workload $WPID &&
	{ "$GCKPT" -p $WPID 2>ckpt.err; echo $? >ckpt.st; } |
	    "$GCKRESTORE" >out 2>err &&
	echo 0 >expect &&
	test_cmp expect ckpt.st &&
	test_must_be_empty ckpt.err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test "$(readlink /proc/$WPID/ns/ipc)" != "$(readlink /proc/self/ns/ipc)" &&
	nothing_left &&
	verify_workload $WPID
'

test_expect_success 'a file the image had open, gone or changed: its absolute path' '
	start gone -m 16 &&
	"$GCKPT" -p $WPID -o gone.gck &&
	wait_gone $WPID &&
	mv "$WSTATUS.data" data.saved &&
	test_status 1 "$GCKRESTORE" gone.gck >out 2>err &&
	test_must_be_empty out &&
	said err "^gpurestore: criu restore failed: file .$WSTATUS.data. that the image.s processes had open is missing on this host (it must exist, with the size it had, to restore)\$" &&
	proc_gone $WPID &&
	nothing_left &&
	cp data.saved "$WSTATUS.data" &&
	truncate -s 100 "$WSTATUS.data" &&
	test_status 1 "$GCKRESTORE" gone.gck >out 2>err &&
	test_must_be_empty out &&
	said err "^gpurestore: criu restore failed: file .$WSTATUS.data. that the image.s processes had open is 100 bytes on this host, not 12345 (it must exist, with the size it had, to restore)\$" &&
	proc_gone $WPID &&
	nothing_left &&
	cp data.saved "$WSTATUS.data" &&
	"$GCKRESTORE" gone.gck >out 2>err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	verify_workload $WPID
'

test_done
