#!/bin/bash
test_description='jobs as people start and move them: shell jobs, pipes, devices, one host'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python
require_sshd
for _c in script nohup mknod mkfifo unshare; do
	command -v $_c >/dev/null || test_skip_all "$_c not found"
done

GCKSEND=$GCK_BINDIR/send/gpusend
GCKRECV=$GCK_BINDIR/recv/gpurecv

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

# ishell NAME: runs the commands of NAME.sh in an interactive bash with
# job control, on a terminal of its own (script(1)), as a user types
# them; what it prints goes to NAME.tty.
ishell() {
	timeout 120 script -qec "exec bash --norc --noprofile -i" /dev/null \
	    <"$1.sh" >"$1.tty" 2>&1
}

# job_ready NAME: waits for the workload of status file NAME.status and
# sets WPID, WCHILD, WSUM and WSTATUS from it.
job_ready() {
	WSTATUS=$TRASH/$1.status
	wait_for_line "$WSTATUS" '^ready ' 60 || return 1
	WPID=$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' "$WSTATUS")
	WCHILD=$(sed -n 's/^ready .*child=\([0-9]*\).*/\1/p' "$WSTATUS")
	WSUM=$(sed -n 's/^ready .*sum=\([0-9a-f]*\).*/\1/p' "$WSTATUS")
	started="$started $WPID"
}

# shell_job NAME COMMAND: a script for ishell that starts COMMAND (a
# workload with status file NAME.status, started in the background as
# COMMAND says), notes its process group and session, checkpoints it
# with gpuckpt -p PID | gpurestore, and writes the pipeline's status.
shell_job() {
	cat >"$1.sh" <<-EOF
	cd "$TRASH"
	case \$- in *m*) echo on >$1.monitor ;; esac
	echo \$\$ >$1.shell
	$2
	while ! grep '^ready ' $1.status >/dev/null 2>&1; do sleep 0.1; done
	p=\$(sed -n 's/^ready pid=\([0-9]*\).*/\1/p' $1.status)
	ps -o pgid=,sid= -p \$p >$1.ids
	"$GCKPT" -p \$p 2>$1.ckerr | "$GCKRESTORE" >$1.out 2>$1.rserr
	echo "\${PIPESTATUS[*]}" >$1.st
	exit
	EOF
}

# moved NAME: the job of NAME, started from a shell with job control in
# a process group of its own in the shell's session, was moved by the
# pipe: both ends succeeded, the same PID runs in a session that is not
# the shell's, and its memory, thread and child are intact.
moved() {
	test "$(cat $1.monitor)" = on &&
	job_ready $1 &&
	read pgid sid <$1.ids &&
	test "$pgid" = "$WPID" &&
	test "$sid" = "$(cat $1.shell)" &&
	echo "0 0" >expect &&
	test_cmp expect $1.st &&
	test_must_be_empty $1.ckerr &&
	test_must_be_empty $1.rserr &&
	echo $WPID >expect &&
	test_cmp expect $1.out &&
	test "$(proc_field $WPID 6)" != "$sid" &&
	verify_workload $WPID &&
	test " child=$WCHILD" = "$(grep '^verify ' $WSTATUS | tail -n 1 |
	    sed 's/.*\( child=[0-9]*\) gap=[0-9]*$/\1/')"
}

test_expect_success 'cmd >log 2>&1 & from an interactive shell moves' '
	shell_job amp "\"$WORKLOAD\" -m 16 -f amp.status >amp.log 2>&1 &" &&
	ishell amp &&
	moved amp &&
	# its input was the terminal: /dev/null now, as nohup would
	test "$(readlink /proc/$WPID/fd/0)" = /dev/null &&
	test "$(readlink /proc/$WPID/fd/1)" = "$TRASH/amp.log"
'

test_expect_success 'nohup cmd & from an interactive shell moves' '
	shell_job nohup "nohup \"$WORKLOAD\" -m 16 -f nohup.status &" &&
	ishell nohup &&
	test -f nohup.out &&
	moved nohup
'

test_expect_success 'cmd & disown from an interactive shell moves' '
	shell_job disown "\"$WORKLOAD\" -m 16 -f disown.status >disown.log 2>&1 & disown" &&
	ishell disown &&
	moved disown
'

test_expect_success 'cmd & writing to the terminal moves, and says so' '
	shell_job term "\"$WORKLOAD\" -m 16 -f term.status &" &&
	ishell term &&
	job_ready term &&
	test_line_count term.ckerr 1 &&
	test_grep "^gpuckpt: process $WPID wrote to terminal /dev/pts/[0-9]* on fd 1, which a restore cannot give back: restored, it writes to /dev/null there\$" term.ckerr &&
	: >term.ckerr &&
	moved term &&
	for fd in 0 1 2; do
		test "$(readlink /proc/$WPID/fd/$fd)" = /dev/null || return 1
	done
'

test_expect_success 'a job whose root leads no process group moves' '
	cat >inner.sh <<-EOF &&
	cd "$TRASH"
	sh -c "\"$WORKLOAD\" -m 16 -f inner.status </dev/null >/dev/null 2>&1 & wait" </dev/null >/dev/null 2>&1 &
	echo \$! >inner.sh.pid
	while ! grep "^ready " inner.status >/dev/null 2>&1; do sleep 0.1; done
	p=\$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" inner.status)
	ps -o pgid= -p \$p >inner.pgid
	"$GCKPT" -p \$p 2>inner.ckerr | "$GCKRESTORE" >inner.out 2>inner.rserr
	echo "\${PIPESTATUS[*]}" >inner.st
	exit
	EOF
	ishell inner &&
	job_ready inner &&
	started="$started $(cat inner.sh.pid)" &&
	test $(cat inner.pgid) = $(cat inner.sh.pid) &&
	echo "0 0" >expect &&
	test_cmp expect inner.st &&
	test_must_be_empty inner.ckerr &&
	test_must_be_empty inner.rserr &&
	verify_workload $WPID
'

test_expect_success 'a | b &: gpuckpt -p a refuses, and both run on' '
	cat >pipe.sh <<-EOF &&
	cd "$TRASH"
	"$WORKLOAD" -m 16 -f pipe.status </dev/null 2>pipe.err | cat >pipe.log &
	echo \$! >pipe.cat
	while ! grep "^ready " pipe.status >/dev/null 2>&1; do sleep 0.1; done
	p=\$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" pipe.status)
	"$GCKPT" -p \$p 2>pipe.ckerr | "$GCKRESTORE" >pipe.out 2>pipe.rserr
	echo "\${PIPESTATUS[*]}" >pipe.st
	disown -a
	exit
	EOF
	ishell pipe &&
	job_ready pipe &&
	cat=$(cat pipe.cat) &&
	started="$started $cat" &&
	test "$(cut -d" " -f1 pipe.st)" = 1 &&
	test_line_count pipe.ckerr 1 &&
	test_grep "^gpuckpt: cannot checkpoint pid $WPID: process $WPID (.workload.) has a pipe on fd 1 to process $cat (.cat.) outside the tree, which a restore could not join up again (checkpoint the whole pipeline: start it under one shell, e.g. (a | b) &, and give that shell.s pid); process tree $WPID left running\$" pipe.ckerr &&
	verify_workload $WPID &&
	proc_running $cat
'

test_expect_success '(a | b) & moves whole' '
	cat >sub.sh <<-EOF &&
	cd "$TRASH"
	( "$WORKLOAD" -m 16 -f sub.status 2>sub.err | cat >sub.log ) </dev/null >/dev/null 2>&1 &
	p=\$!
	echo \$p >sub.pid
	while ! grep "^ready " sub.status >/dev/null 2>&1; do sleep 0.1; done
	"$GCKPT" -p \$p 2>sub.ckerr | "$GCKRESTORE" >sub.out 2>sub.rserr
	echo "\${PIPESTATUS[*]}" >sub.st
	exit
	EOF
	ishell sub &&
	job_ready sub &&
	sub=$(cat sub.pid) &&
	started="$started $sub" &&
	echo "0 0" >expect &&
	test_cmp expect sub.st &&
	test_must_be_empty sub.ckerr &&
	echo $sub >expect &&
	test_cmp expect sub.out &&
	verify_workload $WPID &&
	proc_descendants $sub >desc &&
	test_grep "^$WPID\$" desc &&
	for p in $(cat desc); do proc_running $p || return 1; done &&
	test "$(wc -l <desc)" -ge 3
'

# under_script NAME: a workload (status file NAME.status) in a session
# of its own on the terminal of a script(1), whose PID is $emu.
under_script() {
	(setsid script -qfc "exec \"$WORKLOAD\" -m 8 -f $1.status" /dev/null \
	    </dev/null >/dev/null 2>&1 &) &&
	job_ready $1 &&
	emu=$(proc_field $WPID 4) &&
	started="$started $emu"
}

test_expect_success 'a terminal emulator (a pty master) is refused, and runs on' '
	under_script emu &&
	test_status 1 "$GCKPT" -p $emu >emu.gck 2>err &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: cannot checkpoint pid $emu: process $emu (.script.) holds the master side of a terminal (/dev/ptmx on fd [0-9]*), which a restore could not give back; process tree $emu left running\$" err &&
	proc_running $emu &&
	verify_workload $WPID
'

test_expect_success 'a session on a terminal of its own moves, the terminal /dev/null' '
	under_script sess &&
	test "$(proc_field $WPID 6)" = $WPID &&
	test "$(proc_field $WPID 7)" != 0 &&
	test_status 0 "$GCKPT" -p $WPID -o sess.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: process $WPID wrote to terminal /dev/pts/[0-9]* on fd 1" err &&
	# script(1) stops itself as its child is stopped: it reaps on SIGCONT
	script_reap $emu $WPID &&
	test_status 0 "$GCKRESTORE" sess.gck >out 2>err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test "$(proc_field $WPID 7)" = 0 &&
	test "$(readlink /proc/$WPID/fd/1)" = /dev/null &&
	verify_workload $WPID
'

# Outputs that are not regular files: written in place, never replaced.

test_expect_success 'start a workload' '
	start dev -m 16 &&
	mknod full c 1 7 &&
	mknod null c 1 3 &&
	mkfifo fifo
'

test_expect_success 'gpuckpt -o FULL (a copy of /dev/full): fails, the device stays' '
	test_status 1 "$GCKPT" -p $WPID -o full >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: .*No space left on device; process tree $WPID left running\$" err &&
	test -c full &&
	test "$(stat -c %t:%T full)" = 1:7 &&
	verify_workload $WPID &&
	test -z "$(ls -A "$TMPDIR")" &&
	test -z "$(ls -A | grep "^full\\.")"
'

test_expect_success 'gpuckpt -o NULL (a copy of /dev/null): the tree runs on' '
	test_status 0 "$GCKPT" -p $WPID -o null >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	test -c null &&
	test "$(stat -c %t:%T null)" = 1:3 &&
	verify_workload $WPID &&
	test_status 0 "$GCKPT" -p $WPID >null 2>err &&
	test_must_be_empty err &&
	test -c null &&
	verify_workload $WPID &&
	test -z "$(ls -A | grep "^null\\.")"
'

test_expect_success 'gpuckpt -o FIFO writes into it; the tree is left stopped' '
	{ cat fifo >fifo.gck & } &&
	test_status 0 "$GCKPT" -p $WPID -o fifo >out 2>err &&
	wait &&
	test -p fifo &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: process tree $WPID left stopped: its image went to a pipe" err &&
	test "$(proc_field $WPID 3)" = T &&
	test "$(proc_field $WCHILD 3)" = T &&
	"$GCKINSPECT" --verify fifo.gck >out &&
	test_grep "^image ok" out
'

test_expect_success 'gpurestore of that image on this host ends the stopped source' '
	start_time=$(proc_field $WPID 22) &&
	test_status 0 "$GCKRESTORE" fifo.gck >out 2>err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test "$(proc_field $WPID 22)" != "$start_time" &&
	verify_workload $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'gpuckpt -o LINK writes the file the link names' '
	kill_tree $WPID &&
	start link -m 8 &&
	echo old >real.gck &&
	ln -s real.gck link.gck &&
	test_status 0 "$GCKPT" -p $WPID -o link.gck 2>err &&
	test_must_be_empty err &&
	test -h link.gck &&
	test "$(readlink link.gck)" = real.gck &&
	"$GCKINSPECT" --verify real.gck >out &&
	test_grep "^image ok" out &&
	wait_gone $WPID &&
	test -z "$(ls -A | grep "\\.tmp\\.")"
'

# A pipe whose far end never restores: the source waits, stopped.

test_expect_success 'sshd on loopback' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	start_sshd &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts
'

# resume_as_told ERR: runs the 'kill -CONT ...' that gpuckpt's note in
# ERR gives.
resume_as_told() {
	_cmd=$(sed -n "s/.*resume it with '\\(kill -CONT[0-9 ]*\\)'.*/\\1/p" "$1")
	test -n "$_cmd" || { echo >&2 "no resume command in $1"; return 1; }
	$_cmd
}

# not_lost ST ERR: gpuckpt (status ST, stderr ERR) left the tree either
# running (it failed on the broken pipe) or stopped with its note; as
# the note says, the tree is resumed, and it is intact.
not_lost() {
	case $1 in
	0)	test_line_count "$2" 1 &&
		test_grep "^gpuckpt: process tree $WPID left stopped: its image went to a pipe" "$2" &&
		test "$(proc_field $WPID 3)" = T &&
		resume_as_told "$2" ;;
	1)	test_grep "; process tree $WPID left running\$" "$2" ;;
	*)	echo >&2 "gpuckpt exited $1"; return 1 ;;
	esac &&
	verify_workload $WPID
}

test_expect_success 'gpuckpt -p PID | ssh host gpurestoreX (a typo): not lost' '
	start typo -m 1 &&
	{ "$GCKPT" -p $WPID 2>ck.err; echo $? >ck.st; } |
	    remote "${GCKRESTORE}X" >out 2>err
	test $? = 127 &&
	test_grep "${GCKRESTORE}X: " err &&
	not_lost "$(cat ck.st)" ck.err
'

test_expect_success 'a far-end criu failure after the whole image was read: not lost' '
	fake_criu fail-restore &&
	{ "$GCKPT" -p $WPID 2>ck.err; echo $? >ck.st; } |
	    elsewhere "cat >far.gck; GCK_CRIU=$TRASH/fakecriu \"$GCKRESTORE\" far.gck >rs.out 2>rs.err; echo \$? >rs.st" &&
	test "$(cat ck.st)" = 0 &&
	test "$(cat rs.st)" = 1 &&
	test_must_be_empty rs.out &&
	test_line_count rs.err 1 &&
	test_grep "^gpurestore: criu restore failed: injected failure\$" rs.err &&
	not_lost 0 ck.err
'

test_expect_success 'the same, on this host: the image is kept, and restores' '
	{ "$GCKPT" -p $WPID 2>ck.err; echo $? >ck.st; } |
	    GCK_CRIU=$TRASH/fakecriu "$GCKRESTORE" >rs.out 2>rs.err
	test $? = 1 &&
	test "$(cat ck.st)" = 0 &&
	test_must_be_empty ck.err &&
	test_must_be_empty rs.out &&
	test_line_count rs.err 1 &&
	test_grep "^gpurestore: criu restore failed: injected failure; its source had been ended: the image is kept in .$TMPDIR/gpuckpt\\.[A-Za-z0-9]*\\.gck. (restore it from there)\$" rs.err &&
	kept=$(sed -n "s/.*image is kept in .\\([^ ]*\\.gck\\). .*/\\1/p" rs.err) &&
	test -f "$kept" &&
	wait_gone $WPID &&
	test_status 0 "$GCKRESTORE" "$kept" >out &&
	echo $WPID >expect &&
	test_cmp expect out &&
	verify_workload $WPID &&
	rm "$kept" &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'the pipe cut in its last bytes: the source waits, stopped' '
	{ "$GCKPT" -p $WPID 2>ck.err; echo $? >ck.st; } | head -c -1000 |
	    "$GCKRESTORE" >rs.out 2>rs.err
	test $? = 1 &&
	test_must_be_empty rs.out &&
	test_line_count rs.err 1 &&
	test_grep "^gpurestore: image truncated .*; nothing restored: its source, process tree $WPID, is left stopped on this host\$" rs.err &&
	test "$(cat ck.st)" = 0 &&
	not_lost 0 ck.err &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'a gpurestore on this host failing before the image: not lost' '
	{ "$GCKPT" -p $WPID 2>ck.err; echo $? >ck.st; } |
	    TMPDIR=/nonexistent "$GCKRESTORE" >rs.out 2>rs.err
	test $? = 1 &&
	test_line_count rs.err 1 &&
	test_grep "^gpurestore: cannot make a work directory in ./nonexistent.: No such file or directory\$" rs.err &&
	not_lost "$(cat ck.st)" ck.err
'

# gpusend and gpurecv on one host.

# gsend REMOTE_PATH ARGS: gpusend to the sshd here, gpurecv run there as
# REMOTE_PATH says, with our key and known_hosts.
gsend() {
	_rp=$1
	shift
	"$GCKSEND" -P "$port" -i "$TRASH/userkey" -o IdentityAgent=none \
	    -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "TMPDIR=$TMPDIR $_rp" "$@"
}

test_expect_success 'gpurecv refuses to be a PID namespace init; the source runs on' '
	test_status 1 gsend "unshare -fp --mount-proc $GCKRECV" \
	    -p $WPID root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: .*refusing to restore as the init of a PID namespace (pid 1): the restored tree would be killed when this process exits; process tree $WPID left running\$" err &&
	verify_workload $WPID &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'gpusend -p PID to this host moves the tree into a PID namespace' '
	oldpid=$WPID &&
	test_status 0 gsend "$GCKRECV" -p $WPID root@127.0.0.1 >out 2>err &&
	test_must_be_empty err &&
	wait_gone $oldpid &&
	newpid=$(cat out) &&
	test -n "$newpid" &&
	test "$newpid" != $oldpid &&
	test "$(readlink /proc/$newpid/ns/pid)" != "$(readlink /proc/self/ns/pid)" &&
	test "$(awk "/^NSpid:/ { print \$NF }" /proc/$newpid/status)" = $oldpid &&
	test "$(cat /proc/$(proc_field $newpid 4)/comm)" = gpuckpt-init &&
	verify_workload $newpid &&
	started="$started $newpid" &&
	kill_tree $newpid &&
	start samehost -m 8
'

# A snapshot leaves the tree as it found it.

test_expect_success 'gpuckpt -R leaves a stopped tree stopped' '
	kill -STOP $WPID $WCHILD &&
	wait_stopped $WPID && wait_stopped $WCHILD &&
	test_status 0 "$GCKPT" -R -p $WPID -o snap.gck 2>err &&
	test_must_be_empty err &&
	test "$(proc_field $WPID 3)" = T &&
	test "$(proc_field $WCHILD 3)" = T &&
	kill -CONT $WPID $WCHILD &&
	verify_workload $WPID
'

test_expect_success 'gpuckpt -R leaves a stopped child stopped, the rest running' '
	kill -STOP $WCHILD &&
	wait_stopped $WCHILD &&
	test_status 0 "$GCKPT" -R -p $WPID -o snap2.gck 2>err &&
	test_must_be_empty err &&
	proc_running $WPID &&
	test "$(proc_field $WCHILD 3)" = T &&
	kill -CONT $WCHILD &&
	verify_workload $WPID
'

test_expect_success 'a failed checkpoint leaves a stopped tree stopped' '
	fake_criu fail-after &&
	kill -STOP $WPID $WCHILD &&
	wait_stopped $WPID && wait_stopped $WCHILD &&
	test_status 1 env GCK_CRIU=$TRASH/fakecriu "$GCKPT" -p $WPID \
	    -o fail.gck >out 2>err &&
	test_line_count err 1 &&
	test_grep "; process tree $WPID left stopped, as it was\$" err &&
	test "$(proc_field $WPID 3)" = T &&
	test "$(proc_field $WCHILD 3)" = T &&
	! test -e fail.gck &&
	kill -CONT $WPID $WCHILD &&
	verify_workload $WPID
'

# taken.sh: in a PID namespace of its own, a stopped process takes the
# image's PID; the restore there goes into a namespace of its own again,
# and the copy checks itself.
cat >taken.sh <<'EOF'
echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid
sleep 1000 &
s=$!
kill -STOP $s
until grep -q "^State:.T" /proc/$s/status; do sleep 0.1; done
"$GCKRESTORE" snap.gck >taken.out 2>taken.err
echo $? >taken.st
echo $s >taken.pid
r=$(cat taken.out)
awk '/^NSpid:/ { print $NF }' /proc/$r/status >taken.nspid
readlink /proc/$r/ns/pid >taken.ns
readlink /proc/self/ns/pid >here.ns
n=$(grep -c "^verify " "$2")
kill -USR1 $r
i=0
while test $(grep -c "^verify " "$2") -le $n && test $i -lt 100; do
	sleep 0.1
	i=$((i + 1))
done
grep "^verify " "$2" | tail -n 1 >taken.verify
EOF

test_expect_success 'a PID taken: gpurestore says so and restores in a PID namespace' '
	GCKRESTORE=$GCKRESTORE elsewhere "sh taken.sh $WPID $WSTATUS" &&
	test "$(cat taken.pid)" = $WPID &&
	test "$(cat taken.st)" = 0 &&
	test_line_count taken.err 1 &&
	test_grep "^gpurestore: pid $WPID of the image is in use on this host (by .[a-z]*.): restoring the tree in a PID namespace of its own, where it keeps its PIDs (--pidns)\$" taken.err &&
	test "$(cat taken.out)" != $WPID &&
	test "$(cat taken.nspid)" = $WPID &&
	test "$(cat taken.ns)" != "$(cat here.ns)" &&
	test_grep "^verify ok sum=$WSUM " taken.verify
'

test_expect_success 'nothing left in TMPDIR' '
	test -z "$(ls -A "$TMPDIR")"
'

test_done
