#!/bin/sh
test_description='gpusend and gpurecv through a real sshd: hand-over, failures, stores'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python
require_sshd
for _c in ssh-agent ssh-add unshare; do
	command -v $_c >/dev/null || test_skip_all "$_c not found"
done

GCKSEND=$GCK_BINDIR/send/gpusend
GCKRECV=$GCK_BINDIR/recv/gpurecv
RELAY=$GCK_SRCDIR/relay.py
# The remote end: gpurecv, its scratch space apart from ours.
RUNDIR=$TRASH/run
RPATH="GCK_RUNDIR=$RUNDIR TMPDIR=$TRASH/rtmp $GCKRECV"

sshd_pid=
started=
relay_pid=
agent_pid=
test_cleanup() {
	test -n "$relay_pid" && kill $relay_pid 2>/dev/null
	test -n "$agent_pid" && kill $agent_pid 2>/dev/null
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	test -n "$sshd_pid" && kill_tree $sshd_pid >/dev/null 2>&1
	:
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
}

# gsend_base ARGS: gpusend to this sshd, with our known_hosts and
# gpurecv, and a home of its own (no keys but those we give).  A later
# option of the same name wins.
gsend_base() {
	HOME=$TRASH/home "$GCKSEND" -P "$port" \
	    -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "$RPATH" "$@"
}

# gsend ARGS: the same, with the user key and no agent.
gsend() {
	gsend_base -i "$TRASH/userkey" -o IdentityAgent=none "$@"
}

# remote_gone PID: waits up to 10 seconds for PID of the namespace (a
# tree restored there, or being restored) to be gone.
remote_gone() {
	_i=0
	while test -n "$(ns_pid $1)"; do
		_i=$((_i + 1))
		if test $_i -gt 50; then
			echo >&2 "process $1 is still there: $(ns_pid $1)"
			return 1
		fi
		sleep 0.2
	done
}

# verify_there PID: the tree restored as PID in the namespace runs, its
# memory, thread and child intact (the child's PID the same).  Sets
# VHOST, its PID here.
verify_there() {
	VHOST=$(ns_pid $1)
	test -n "$VHOST" || { echo >&2 "no process $1 there"; return 1; }
	verify_workload $VHOST || return 1
	grep '^verify ' "$WSTATUS" | tail -n 1 >vline &&
	test_grep " child=$WCHILD gap=[0-9]*\$" vline
}

# nothing_left: no scratch file here or there, and no record or socket
# of a hand-over left in the run directory.
nothing_left() {
	test -z "$(ls -A "$TMPDIR")" &&
	test -z "$(ls -A "$TRASH/rtmp")" &&
	{ ls -A $RUNDIR 2>/dev/null; true; } >run.after &&
	test_cmp run.before run.after
}

# recv_gone: waits up to 10 seconds for every gpurecv to have exited
# (one whose connection was cut finds out in its own time, and may
# still be writing its partial).
recv_gone() {
	_i=0
	while pgrep -x gpurecv >/dev/null; do
		_i=$((_i + 1)) && test $_i -lt 100 || return 1
		sleep 0.1
	done
}

# records_left: the records of hand-overs that failed, left in the run
# directory for 'gpurecv --outcome' to answer; they are removed.
records_left() {
	{ ls -A $RUNDIR 2>/dev/null; true; } >run.after &&
	sort run.before >run.b &&
	sort run.after >run.a &&
	comm -13 run.b run.a >run.new &&
	while read _f; do
		case $_f in
		*.rec)	;;
		*)	echo >&2 "'$_f' left in $RUNDIR"; return 1 ;;
		esac
		grep "^\(failed\|aborted\)\$" "$RUNDIR/$_f" >/dev/null || {
			echo >&2 "$RUNDIR/$_f: $(cat "$RUNDIR/$_f")"
			return 1
		}
		rm "$RUNDIR/$_f" || return 1
	done <run.new
}

# start_relay MODE [N [QUIET]]: a relay.py in front of sshd; sets rport.
start_relay() {
	rm -f relay.port relay.port.count
	python3 "$RELAY" "$TRASH/relay.port" "$port" "$@" 2>relay.err &
	relay_pid=$!
	_i=0
	while ! test -s relay.port; do
		_i=$((_i + 1))
		if test $_i -gt 100 || ! test -d /proc/$relay_pid; then
			cat >&2 relay.err
			return 1
		fi
		sleep 0.05
	done
	rport=$(cat relay.port)
	echo "[127.0.0.1]:$rport $(cat hostkey.pub)" >>known_hosts
}

# stop_relay: kills it; relayed sets the bytes it relayed to the server.
stop_relay() {
	kill $relay_pid 2>/dev/null
	wait $relay_pid 2>/dev/null
	relay_pid=
	relayed=$(cat relay.port.count)
}

# source_ok: the source tree ($SRC) runs here, intact, and moves on.
source_ok() {
	proc_running $SRC && proc_running $SRCCHILD &&
	verify_workload $SRC $SRCSTATUS &&
	test $VCOUNTER -gt $src_counter &&
	src_counter=$VCOUNTER
}

# failed_send ERR: gpusend failed with one line on ERR that names its
# side (as a pattern) and the source tree left running.
failed_send() {
	cat >&2 "$1"
	test_line_count "$1" 1 &&
	test_grep "^gpusend: $2" "$1" &&
	test_grep "; process tree $SRC left running\$" "$1"
}

mkdir home rtmp store

test_expect_success 'sshd in a PID namespace of its own' '
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-other -f otherkey &&
	cp userkey.pub authorized_keys &&
	start_nssh &&
	echo "[127.0.0.1]:$port $(cat hostkey.pub)" >known_hosts &&
	remote echo hello >out &&
	echo hello >expect &&
	test_cmp expect out &&
	remote "readlink /proc/self/ns/pid" >out &&
	test "$(cat out)" = "$ns_id" &&
	test "$ns_id" != "$(readlink /proc/self/ns/pid)" &&
	{ ls -A $RUNDIR 2>/dev/null; true; } >run.before
'

test_expect_success 'gpusend -p PID host moves the tree there' '
	start mig -m 64 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	gsend -p $WPID root@127.0.0.1 >out 2>err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	verify_there $WPID &&
	test $VCOUNTER -gt $before &&
	sleep 0.2 &&
	verify_there $WPID &&
	nothing_left &&
	kill_tree $VHOST
'

test_expect_success 'gpusend -p of a session on a terminal says so, and moves it' '
	(setsid script -qfc "exec \"$WORKLOAD\" -m 8 -f term.status" /dev/null \
	    </dev/null >/dev/null 2>&1 &) &&
	wait_for_line term.status "^ready " 60 &&
	WSTATUS=$TRASH/term.status &&
	WPID=$(sed -n "s/^ready pid=\([0-9]*\).*/\1/p" term.status) &&
	WCHILD=$(sed -n "s/^ready .*child=\([0-9]*\).*/\1/p" term.status) &&
	emu=$(proc_field $WPID 4) &&
	started="$started $WPID $emu" &&
	gsend -p $WPID root@127.0.0.1 >out 2>err &&
	test_line_count err 1 &&
	test_grep "^gpusend: process $WPID wrote to terminal /dev/pts/[0-9]* on fd 1, which a restore cannot give back: restored, it writes to /dev/null there\$" err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	# script(1) stops itself as its child is stopped: it reaps on SIGCONT
	script_reap $emu $WPID &&
	verify_there $WPID &&
	test "$(readlink /proc/$VHOST/fd/1)" = /dev/null &&
	kill_tree $VHOST
'

test_expect_success 'gpusend --parallel 3 moves it over three connections' '
	start par -m 32 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	gsend -v --parallel 3 -p $WPID root@127.0.0.1 >out 2>err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test_grep "over 3 connections" err &&
	wait_gone $WPID &&
	verify_there $WPID &&
	test $VCOUNTER -gt $before &&
	nothing_left &&
	kill_tree $VHOST
'

test_expect_success 'the agent is asked for the key' '
	eval "$(ssh-agent -s -a "$TRASH/agent.sock")" >/dev/null &&
	agent_pid=$SSH_AGENT_PID &&
	ssh-add -q userkey 2>/dev/null &&
	start agent -m 16 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	SSH_AUTH_SOCK=$TRASH/agent.sock gsend_base -p $WPID root@127.0.0.1 \
	    >out 2>err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	wait_gone $WPID &&
	verify_there $WPID &&
	test $VCOUNTER -gt $before &&
	nothing_left &&
	kill_tree $VHOST
'

# From here on one tree, $SRC, is sent and must survive every failure.
test_expect_success 'a tree to fail to send' '
	start src -m 32 &&
	SRC=$WPID SRCCHILD=$WCHILD SRCSTATUS=$WSTATUS &&
	verify_workload $SRC &&
	src_counter=$VCOUNTER
'

test_expect_success 'without the agent nor a key, authentication fails' '
	test_status 1 gsend_base -o IdentityAgent=none -p $SRC \
	    root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: ssh root@127.0.0.1:$port: .*authentication failed" err &&
	source_ok &&
	nothing_left
'

test_expect_success 'an unknown host is refused, and not learnt' '
	: >kh.empty &&
	test_status 1 gsend -o UserKnownHostsFile=$TRASH/kh.empty \
	    -p $SRC root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: ssh root@127.0.0.1:$port: .*not known" err &&
	test_must_be_empty kh.empty &&
	source_ok &&
	nothing_left
'

test_expect_success 'images to store' '
	start img -m 64 &&
	"$GCKPT" -c none --leave-running -p $WPID -o img.gck 2>err &&
	test_must_be_empty err &&
	kill_tree $WPID &&
	start small -m 4 &&
	"$GCKPT" --leave-running -p $WPID -o small.gck 2>err &&
	test_must_be_empty err &&
	kill_tree $WPID &&
	test $(wc -c <img.gck) -gt $((64 << 20)) &&
	test $(wc -c <small.gck) -lt $((8 << 20)) &&
	size=$(wc -c <img.gck)
'

test_expect_success '--accept-new learns a new host, as OpenSSH reads it' '
	: >kh.new &&
	gsend -o UserKnownHostsFile=$TRASH/kh.new --accept-new small.gck \
	    root@127.0.0.1:$TRASH/store/ >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	cmp small.gck store/small.gck &&
	test_line_count kh.new 1 &&
	remote_kh "$TRASH/kh.new" echo hello >out &&
	echo hello >expect &&
	test_cmp expect out &&
	rm store/small.gck
'

test_expect_success 'a hashed known_hosts is read' '
	cp known_hosts kh.hashed &&
	ssh-keygen -q -H -f kh.hashed 2>/dev/null &&
	! grep 127.0.0.1 kh.hashed &&
	test_grep "^|1|" kh.hashed &&
	remote_kh "$TRASH/kh.hashed" true &&
	gsend -o UserKnownHostsFile=$TRASH/kh.hashed small.gck \
	    root@127.0.0.1:$TRASH/store/ >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	cmp small.gck store/small.gck &&
	rm store/small.gck
'

# OpenSSH takes the key of the plain host name when nothing is recorded
# for [host]:port, but not a different key there; gpusend decides as
# OpenSSH's ssh does with the same file.
test_expect_success 'a host recorded without its port: as OpenSSH decides' '
	echo "127.0.0.1 $(cat hostkey.pub)" >kh.plain &&
	cp kh.plain kh.plain.orig &&
	if remote_kh "$TRASH/kh.plain" true 2>/dev/null
	then want=0
	else want=1
	fi &&
	test_status $want gsend -o UserKnownHostsFile=$TRASH/kh.plain \
	    small.gck root@127.0.0.1:$TRASH/store/ >out 2>err &&
	test_must_be_empty out &&
	if test $want = 0
	then test_must_be_empty err && cmp small.gck store/small.gck
	else test_grep "^gpusend: ssh root@127.0.0.1:$port: .*not known" err
	fi &&
	test_cmp kh.plain.orig kh.plain &&
	rm -f store/small.gck &&
	echo "127.0.0.1 $(cat otherkey.pub)" >kh.plain &&
	cp kh.plain kh.plain.orig &&
	! remote_kh "$TRASH/kh.plain" true 2>/dev/null &&
	test_status 1 gsend -o UserKnownHostsFile=$TRASH/kh.plain \
	    small.gck root@127.0.0.1:$TRASH/store/ >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: ssh root@127.0.0.1:$port: .*not known" err &&
	test_cmp kh.plain.orig kh.plain &&
	test -z "$(ls -A store)"
'

test_expect_success 'a changed host key is refused, even with --accept-new' '
	echo "[127.0.0.1]:$port $(cat otherkey.pub)" >kh.changed &&
	cp kh.changed kh.changed.orig &&
	! remote_kh "$TRASH/kh.changed" true 2>/dev/null &&
	test_status 1 gsend -o UserKnownHostsFile=$TRASH/kh.changed \
	    -p $SRC root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: ssh root@127.0.0.1:$port: " err &&
	grep -i -E "changed|differ|does not match|mismatch" err &&
	test_status 1 gsend -o UserKnownHostsFile=$TRASH/kh.changed \
	    --accept-new -p $SRC root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: ssh root@127.0.0.1:$port: " err &&
	test_cmp kh.changed.orig kh.changed &&
	source_ok &&
	nothing_left
'

test_expect_success 'a key the host does not take is refused' '
	test_status 1 gsend -i "$TRASH/otherkey" -p $SRC root@127.0.0.1 \
	    >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: ssh root@127.0.0.1:$port: .*authentication failed" err &&
	source_ok &&
	nothing_left
'

test_expect_success 'the default key of the home directory is tried' '
	mkdir -p home/.ssh &&
	cp userkey home/.ssh/id_ed25519 &&
	cp userkey.pub home/.ssh/id_ed25519.pub &&
	gsend_base -o IdentityAgent=none small.gck \
	    root@127.0.0.1:$TRASH/store/ >out 2>err &&
	rm -r home/.ssh &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	cmp small.gck store/small.gck &&
	rm store/small.gck
'

test_expect_success 'a closed port is a refused connection' '
	test_status 1 gsend -P 1 -p $SRC root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: ssh root@127.0.0.1:1: .*refused" err &&
	source_ok &&
	nothing_left
'

test_expect_success 'a remote that never answers times out' '
	printf "#!/bin/sh\nexec sleep 30\n" >hang &&
	chmod +x hang &&
	t0=$(date +%s) &&
	test_status 1 gsend --remote-path "$TRASH/hang" --timeout 2 \
	    -p $SRC root@127.0.0.1 >out 2>err &&
	t1=$(date +%s) &&
	test $((t1 - t0)) -le 8 &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: \(ssh root@127.0.0.1:$port\|remote 127.0.0.1\): " err &&
	source_ok &&
	nothing_left
'

test_expect_success 'how many bytes a hand-over takes, through a relay' '
	start count -m 32 &&
	start_relay count &&
	gsend -P $rport -p $WPID root@127.0.0.1 >out 2>err &&
	stop_relay &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	verify_there $WPID &&
	kill_tree $VHOST &&
	total=$relayed &&
	test $total -gt $((32 << 20)) &&
	start_relay count &&
	test_status 1 gsend -P $rport --remote-path "$TRASH/hang" --timeout 1 \
	    -p $SRC root@127.0.0.1 >out 2>err &&
	stop_relay &&
	handshake=$relayed &&
	test $handshake -gt 1000 &&
	test $handshake -lt 65536 &&
	source_ok
'

# cut_at N: the connection is cut after N bytes; gpusend fails naming
# ssh, and nothing is left of the tree there.
cut_at() {
	start_relay cut $1 &&
	{ test_status 1 gsend -P $rport -p $SRC root@127.0.0.1 >out 2>err
	  _st=$?; stop_relay; test $_st -eq 0; } &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: ssh root@127.0.0.1:$rport: " err &&
	source_ok &&
	remote_gone $SRC &&
	remote_gone $SRCCHILD &&
	nothing_left
}

test_expect_success 'a connection cut during the ssh handshake' '
	cut_at $((handshake / 2))
'

test_expect_success 'a connection cut after 64 KiB' '
	cut_at 65536 &&
	failed_send err "ssh root@127.0.0.1:$rport: "
'

test_expect_success 'a connection cut at a quarter of the image' '
	cut_at $((total / 4)) &&
	failed_send err "ssh root@127.0.0.1:$rport: "
'

test_expect_success 'a connection cut at three quarters of the image' '
	cut_at $((total * 3 / 4)) &&
	failed_send err "ssh root@127.0.0.1:$rport: "
'

test_expect_success 'a connection frozen half way: gpusend gives up' '
	start_relay freeze $((total / 2)) &&
	{ gsend -P $rport --timeout 3 -p $SRC root@127.0.0.1 >out 2>err &
	  p=$!; } &&
	{ wait_child $p 30; st=$?; } &&
	stop_relay &&
	test $st -eq 1 &&
	test_must_be_empty out &&
	failed_send err "\(ssh root@127.0.0.1:$rport\|remote 127.0.0.1\): " &&
	source_ok &&
	remote_gone $SRC &&
	nothing_left
'

test_expect_success 'a connection cut once all the image has gone' '
	# criu takes its time to finish the restore there: the image is
	# all sent and gpusend waits, quiet, for the tree to be ready.
	cat >slowcriu <<-EOF &&
	#!/bin/sh
	case " \$* " in
	*" restore "*)
		"$CRIU" "\$@"
		st=\$?
		sleep 2
		exit \$st ;;
	esac
	exec "$CRIU" "\$@"
	EOF
	chmod +x slowcriu &&
	start_relay quiet $((total / 2)) 1 &&
	{ test_status 1 gsend -P $rport -p $SRC --remote-path \
	    "GCK_CRIU=$TRASH/slowcriu $RPATH" root@127.0.0.1 >out 2>err
	  st=$?; stop_relay; test $st -eq 0; } &&
	test $relayed -ge $((total * 9 / 10)) &&
	test_must_be_empty out &&
	failed_send err "ssh root@127.0.0.1:$rport: " &&
	test_grep "did not let the restored tree run" err &&
	source_ok &&
	remote_gone $SRC &&
	remote_gone $SRCCHILD &&
	records_left &&
	nothing_left
'

test_expect_success 'the answer lost once the tree runs there: asked, moved' '
	# gpurecv as usual, but its answers pass through a filter that
	# drops the one saying the tree runs, and ends the connection
	cat >losek <<-EOF &&
	#!/bin/sh
	export GCK_RUNDIR="$RUNDIR"
	case " \$* " in
	*" --outcome "*) exec "$GCKRECV" "\$@" ;;
	esac
	rm -f "$TRASH/k.fifo"
	mkfifo "$TRASH/k.fifo" || exit 1
	exec 3<&0
	TMPDIR="$TRASH/rtmp" setsid "$GCKRECV" "\$@" <&3 3<&- \
	    >"$TRASH/k.fifo" 2>"$TRASH/k.err" &
	exec 3<&-
	python3 "$GCK_SRCDIR/kframe.py" drop <"$TRASH/k.fifo"
	EOF
	chmod +x losek &&
	start lost -m 16 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	gsend -v -p $WPID --remote-path "$TRASH/losek" root@127.0.0.1 \
	    >out 2>err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	test_grep "asking 127.0.0.1 what became of the hand-over" err &&
	test_grep "remote 127.0.0.1 runs process tree $WPID" err &&
	wait_gone $WPID &&
	verify_there $WPID &&
	test $VCOUNTER -gt $before &&
	kill_tree $VHOST &&
	rm -f k.fifo &&
	# its record stays, for whoever asks again, saying the same
	{ ls -A $RUNDIR 2>/dev/null; true; } >run.after &&
	comm -13 run.before run.after >run.new &&
	test_line_count run.new 1 &&
	grep "^running $WPID\$" "$RUNDIR/$(cat run.new)" &&
	rm "$RUNDIR/$(cat run.new)" &&
	nothing_left
'

test_expect_success 'SIGTERM to gpusend after the go-ahead: it sees it through' '
	# gpurecv as usual, but its answer that the tree runs is held back
	# 2 s, and k.held says when it came: gpusend has said go by then
	cat >holdk <<-EOF &&
	#!/bin/sh
	export GCK_RUNDIR="$RUNDIR"
	rm -f "$TRASH/k.fifo"
	mkfifo "$TRASH/k.fifo" || exit 1
	exec 3<&0
	TMPDIR="$TRASH/rtmp" "$GCKRECV" "\$@" <&3 3<&- >"$TRASH/k.fifo" &
	exec 3<&-
	python3 "$GCK_SRCDIR/kframe.py" hold "$TRASH/k.held" 2 <"$TRASH/k.fifo"
	EOF
	chmod +x holdk &&
	rm -f k.held &&
	start held -m 16 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	{ HOME=$TRASH/home "$GCKSEND" -P "$port" \
	    -o UserKnownHostsFile="$TRASH/known_hosts" -i "$TRASH/userkey" \
	    -o IdentityAgent=none --remote-path "$TRASH/holdk" \
	    -p $WPID root@127.0.0.1 >out 2>err & } &&
	p=$! &&
	i=0 &&
	while ! test -e k.held && test $i -lt 300; do
		i=$((i + 1))
		sleep 0.1
	done &&
	test -e k.held &&
	kill -TERM $p &&
	{ wait_child $p 30; st=$?; } &&
	test $st -eq 0 &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	wait_gone $WPID &&
	wait_gone $WCHILD &&
	verify_there $WPID &&
	test $VCOUNTER -gt $before &&
	kill_tree $VHOST &&
	rm -f k.fifo k.held &&
	nothing_left
'

test_expect_success 'gpurecv killed half way through the image' '
	cat >killrecv <<-EOF &&
	#!/bin/sh
	# gpurecv, killed once half of the image has come
	rm -f "$TRASH/recv.fifo"
	mkfifo "$TRASH/recv.fifo" || exit 1
	"$GCKRECV" "\$@" <"$TRASH/recv.fifo" &
	p=\$!
	head -c $((total / 2)) >"$TRASH/recv.fifo"
	kill -KILL \$p
	wait \$p
	EOF
	chmod +x killrecv &&
	test_status 1 gsend -p $SRC --remote-path \
	    "GCK_RUNDIR=$RUNDIR TMPDIR=$TRASH/rtmp $TRASH/killrecv" \
	    root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	failed_send err "\(ssh root@127.0.0.1:$port\|remote 127.0.0.1\): " &&
	source_ok &&
	remote_gone $SRC &&
	remote_gone $SRCCHILD &&
	rm -f recv.fifo &&
	# its guard removes its work area
	i=0 &&
	while test -n "$(ls -A rtmp)" && test $i -lt 50; do
		i=$((i + 1))
		sleep 0.1
	done &&
	nothing_left
'

test_expect_success 'a restore that fails there' '
	cat >failcriu <<-EOF &&
	#!/bin/sh
	case " \$* " in
	*" restore "*)
		echo "Error (criu/cr-restore.c:2447): injected failure" >&2
		exit 1 ;;
	esac
	exec "$CRIU" "\$@"
	EOF
	chmod +x failcriu &&
	test_status 1 gsend -p $SRC --remote-path \
	    "GCK_CRIU=$TRASH/failcriu $RPATH" root@127.0.0.1 >out 2>err &&
	test_must_be_empty out &&
	failed_send err "remote 127.0.0.1: " &&
	test_grep "injected failure" err &&
	source_ok &&
	remote_gone $SRC &&
	nothing_left
'

# cuda_logged ACTION...: the stand-in driver logged each ACTION done
# well for every process of the CUDA tree ($CPIDS).
cuda_logged() {
	for _a in "$@"; do
		for _p in $CPIDS; do
			grep "^$_a $_p .* CUDA_SUCCESS " "$F/log" >/dev/null &&
			    continue
			echo >&2 "no $_a of $_p in the log:"
			cat >&2 "$F/log"
			return 1
		done
	done
}

# cuda_running [remote]: for the driver, every process of the tree runs
# on its GPUs, unlocked; asked here, or in the sshd's namespace, where
# the driver finds the restored tree by its PIDs.
cuda_running() {
	for _p in $CPIDS; do
		_s=$(${1:-} env $CUDAENV "$GCK_TESTDIR/fakecuda/fakectl" \
		    state $_p)
		test "$_s" = RUNNING && continue
		echo >&2 "process $_p is $_s for the driver"
		return 1
	done
}

# A tree of CUDA processes, against the stand-in driver of fakecuda/
# on both sides (its state, kept by PID in files, is shared).
test_expect_success 'a CUDA tree: a failed hand-over gives it its GPUs back' '
	F=$TRASH/fake &&
	mkdir -p "$F/inject" "$F/delay" &&
	printf "%s 9.0 1073741824 0000:%02x:00.0 NVIDIA H100 80GB HBM3\n" \
	    GPU-aaaaaaaa-1111-4000-8000-000000000001 1 \
	    GPU-bbbbbbbb-1111-4000-8000-000000000002 2 >"$F/gpus" &&
	CUDAENV="FAKECUDA_DIR=$F GPUCKPT_LIBCUDA=$GCK_TESTDIR/fakecuda/libcuda.so.1 GPUCKPT_LIBNVML=$GCK_TESTDIR/fakecuda/libnvidia-ml.so.1" &&
	(
		export $CUDAENV
		WORKLOAD=$GCK_TESTDIR/cudawork
		LD_LIBRARY_PATH=$GCK_TESTDIR/fakecuda start_workload cuda \
		    -n 3 -m 8 -d 0,1 &&
		echo "$WPID $WSUM $WCHILD $WSTATUS" >cuda.w
	) &&
	read WPID WSUM WCHILD WSTATUS <cuda.w &&
	started="$started $WPID" &&
	CPIDS="$WPID $(proc_descendants $WPID)" &&
	test $(echo $CPIDS | wc -w) -eq 3 &&
	WDEVS=$(sed -n "s/^ready .*devs=\([^ ]*\).*/\1/p" "$WSTATUS") &&
	test -n "$WDEVS" &&
	: >"$F/log" &&
	test_status 1 env $CUDAENV "$GCKSEND" -P "$port" \
	    -o UserKnownHostsFile="$TRASH/known_hosts" -i "$TRASH/userkey" \
	    -o IdentityAgent=none -p $WPID --remote-path \
	    "$CUDAENV GCK_CRIU=$TRASH/failcriu $RPATH" root@127.0.0.1 \
	    >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: remote 127.0.0.1: .*injected failure.*; process tree $WPID left running\$" err &&
	cuda_logged checkpoint restore unlock &&
	cuda_running &&
	for p in $CPIDS; do proc_running $p || break; done &&
	proc_running $p &&
	verify_workload $WPID &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 | grep " devs=$WDEVS\$" &&
	remote_gone $WPID &&
	nothing_left
'

test_expect_success 'a CUDA tree moves; there it gets its GPUs back' '
	: >"$F/log" &&
	env $CUDAENV "$GCKSEND" -P "$port" \
	    -o UserKnownHostsFile="$TRASH/known_hosts" -i "$TRASH/userkey" \
	    -o IdentityAgent=none -p $WPID --remote-path "$CUDAENV $RPATH" \
	    root@127.0.0.1 >out 2>err &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	for p in $CPIDS; do wait_gone $p || break; done &&
	proc_gone $p &&
	cuda_logged restore unlock &&
	cuda_running remote &&
	for p in $CPIDS; do test -n "$(ns_pid $p)" || break; done &&
	test -n "$(ns_pid $p)" &&
	VHOST=$(ns_pid $WPID) &&
	verify_workload $VHOST &&
	grep "^verify ok" "$WSTATUS" | tail -n 1 |
	    grep " child=$WCHILD devs=$WDEVS\$" &&
	nothing_left &&
	kill_tree $VHOST
'

test_expect_success 'gpusend IMAGE host:DIR/ stores it there' '
	gsend img.gck root@127.0.0.1:$TRASH/store/ >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	cmp img.gck store/img.gck &&
	echo img.gck >expect &&
	ls -A store >actual &&
	test_cmp expect actual &&
	rm store/img.gck &&
	nothing_left
'

test_expect_success 'gpusend -v IMAGE host:FILE stores it under that name' '
	gsend -v small.gck root@127.0.0.1:$TRASH/store/other.gck >out 2>err &&
	test_must_be_empty out &&
	cmp small.gck store/other.gck &&
	n=$(wc -c <small.gck) &&
	test_grep "^gpusend: stored 127.0.0.1:$TRASH/store/other.gck ($n bytes, $n of them sent)\$" err &&
	echo other.gck >expect &&
	ls -A store >actual &&
	test_cmp expect actual &&
	rm store/other.gck
'

test_expect_success 'gpusend - host:FILE stores standard input' '
	gsend - root@127.0.0.1:$TRASH/store/stdin.gck <small.gck \
	    >out 2>err &&
	test_must_be_empty out &&
	test_must_be_empty err &&
	cmp small.gck store/stdin.gck &&
	rm store/stdin.gck
'

test_expect_success 'a damaged image is refused there, and not kept' '
	python3 - img.gck >damaged <<-\EOF &&
	import os, sys, tarfile
	path = sys.argv[1]
	mid = os.path.getsize(path) // 2
	with tarfile.open(path) as t:
	    for m in t.getmembers():
	        if m.offset_data <= mid < m.offset_data + m.size:
	            print(m.name)
	            break
	    else:
	        sys.exit("no entry holds byte %d" % mid)
	with open(path, "rb") as f:
	    data = bytearray(f.read())
	data[mid] ^= 0x20
	with open("bad.gck", "wb") as f:
	    f.write(data)
	EOF
	entry=$(cat damaged) &&
	entry=${entry##*/} &&
	entry=${entry%.part[0-9]*} &&
	test -n "$entry" &&
	test_status 1 "$GCKINSPECT" --verify bad.gck >/dev/null 2>inspect.err &&
	test_grep "$entry" inspect.err &&
	sed "s/^gpuinspect: /gpusend: remote 127.0.0.1: /" inspect.err >expect &&
	test_status 1 gsend bad.gck root@127.0.0.1:$TRASH/store/ >out 2>err &&
	test_must_be_empty out &&
	test_cmp expect err &&
	test -z "$(ls -A store)" &&
	nothing_left
'

test_expect_success 'a store cut half way keeps what came' '
	start_relay cut $((size / 2)) &&
	{ test_status 1 gsend -P $rport img.gck \
	    root@127.0.0.1:$TRASH/store/res.gck >out 2>err
	  st=$?; stop_relay; test $st -eq 0; } &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: \(ssh root@127.0.0.1:$rport\|remote 127.0.0.1\): " err &&
	recv_gone &&
	! test -e store/res.gck &&
	part=$(wc -c <store/.res.gck.gpurecv-part) &&
	test $part -gt 0 &&
	test $part -lt $size &&
	head -c $part img.gck | cmp - store/.res.gck.gpurecv-part
'

test_expect_success 'gpusend --resume sends only the rest' '
	start_relay count &&
	gsend -v --resume -P $rport img.gck \
	    root@127.0.0.1:$TRASH/store/res.gck >out 2>err &&
	stop_relay &&
	test_must_be_empty out &&
	cmp img.gck store/res.gck &&
	echo res.gck >expect &&
	ls -A store >actual &&
	test_cmp expect actual &&
	test_grep "^gpusend: stored 127.0.0.1:$TRASH/store/res.gck ($size bytes, $((size - part)) of them sent)\$" err &&
	test $relayed -lt $((size - part + (size - part) / 20 + 65536)) &&
	rm store/res.gck &&
	nothing_left
'

test_expect_success 'gpusend --resume starts over on a partial of another image' '
	head -c $((3 << 20)) small.gck >store/.res.gck.gpurecv-part &&
	head -c $((1 << 20)) /dev/urandom >>store/.res.gck.gpurecv-part &&
	gsend -v --resume img.gck root@127.0.0.1:$TRASH/store/res.gck \
	    >out 2>err &&
	test_must_be_empty out &&
	cmp img.gck store/res.gck &&
	test_grep "sending all of it" err &&
	test_grep "^gpusend: stored 127.0.0.1:$TRASH/store/res.gck ($size bytes, $size of them sent)\$" err &&
	echo res.gck >expect &&
	ls -A store >actual &&
	test_cmp expect actual &&
	rm store/res.gck &&
	nothing_left
'

test_expect_success 'a data frame where GO is due counts as the sender going' '
	start late -m 16 &&
	"$GCKPT" -p $WPID >late.gck &&
	wait_gone $WPID &&
	python3 - late.gck >late.wire <<-\EOF &&
	import json, struct, sys
	def frame(t, seq, data=b""):
	    return b"G" + t + b"\0\0" + struct.pack(">IQ", len(data), seq) + data
	img = open(sys.argv[1], "rb").read()
	out = frame(b"O", 0, b"{\"offset\": 0}")
	seq = 0
	for i in range(0, len(img), 1 << 20):
	    out += frame(b"D", seq, img[i:i + (1 << 20)])
	    seq += 1
	out += frame(b"E", seq, json.dumps({"bytes": len(img)}).encode())
	out += frame(b"D", seq + 1, bytes(1 << 20))
	sys.stdout.buffer.write(out)
	EOF
	test_status 1 env GCK_RUNDIR=$RUNDIR TMPDIR=$TRASH/rtmp "$GCKRECV" \
	    --restore --id 0123456789abcdef0123456789abcdef <late.wire \
	    >out 2>err &&
	test_grep "^gpurecv: gpusend went away before the hand-over" err &&
	wait_gone $WPID &&
	records_left &&
	nothing_left
'

test_expect_success 'a --join whose gpurecv was killed gives up at once' '
	id=00112233445566778899aabbccddeeff &&
	python3 -c "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" \
	    "$RUNDIR/$id.sock" &&
	test -S "$RUNDIR/$id.sock" &&
	test_status 1 timeout 20 env GCK_RUNDIR=$RUNDIR "$GCKRECV" \
	    --join $id </dev/null >out 2>err &&
	test_grep "^gpurecv: the gpurecv of hand-over $id is gone\$" err &&
	test_line_count err 1 &&
	rm "$RUNDIR/$id.sock"
'

test_expect_success 'a --join whose gpusend has gone gives up at once' '
	id=00112233445566778899aabbccddeef0 &&
	{
		timeout 20 env GCK_RUNDIR=$RUNDIR "$GCKRECV" --join $id \
		    </dev/null 2>err
		echo $? >status
	} | true &&
	test "$(cat status)" = 1 &&
	test_grep "^gpurecv: gpusend went away\$" err &&
	test_line_count err 1
'

test_expect_success 'a --join that waits stops at SIGTERM, with one line' '
	env GCK_RUNDIR=$RUNDIR "$GCKRECV" \
	    --join 00112233445566778899aabbccddeef1 </dev/null >out 2>err &
	jpid=$! &&
	sleep 0.3 &&
	kill -TERM $jpid &&
	test_status 1 wait $jpid &&
	test_grep "^gpurecv: interrupted by SIGTERM\$" err &&
	test_line_count err 1
'

test_expect_success 'the source tree is still intact after it all' '
	source_ok &&
	kill_tree $SRC
'

test_expect_success 'a 512 MiB tree moves over 4 connections' '
	start big -m 512 &&
	verify_workload $WPID &&
	before=$VCOUNTER &&
	t0=$(date +%s) &&
	gsend --parallel 4 -p $WPID root@127.0.0.1 >out 2>err &&
	t1=$(date +%s) &&
	echo >&2 "512 MiB moved in $((t1 - t0)) s" &&
	test_must_be_empty err &&
	echo $WPID >expect &&
	test_cmp expect out &&
	wait_gone $WPID &&
	verify_there $WPID &&
	test $VCOUNTER -gt $before &&
	nothing_left &&
	kill_tree $VHOST
'

test_expect_success 'stop sshd: nothing of the namespace is left' '
	p=$sshd_pid &&
	sshd_pid= &&
	kill_tree $p &&
	test ! -d /proc/$ns_init
'

test_done
