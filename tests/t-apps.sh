#!/bin/sh
test_description='real programs over TCP moved by gpuckpt: redis and a client, PostgreSQL, a torch.distributed job'
. "$GCK_SRCDIR/lib.sh"

# What each program is checked by is outside it: redis-cli, psql, the
# steps and weights the job writes, the client's replies; and every
# restored process is a new one, with the PID of the one it replaces.
require_criu
require_python
require_sshd
for _c in redis-server redis-cli ip nsenter unshare setpriv ss; do
	command -v $_c >/dev/null ||
	    test_skip_all "$_c not found (scripts/install-deps installs it)"
done
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
test -x "$PGBIN/postgres" && test -x "$PGBIN/initdb" && test -x "$PGBIN/psql" ||
    test_skip_all "PostgreSQL not found in /usr/lib/postgresql (postgresql)"
id postgres >/dev/null 2>&1 || test_skip_all "no user postgres (postgresql)"
# torch is Debian's python3-torch, for Debian's python3.
TORCHPY=${GCK_TORCH_PYTHON:-/usr/bin/python3}
"$TORCHPY" -c 'import torch.distributed as d; assert d.is_gloo_available()' \
    2>/dev/null ||
    test_skip_all "$TORCHPY has no torch with gloo (python3-torch)"

GCKSEND=$GCK_BINDIR/send/gpusend
RPATH="GCK_RUNDIR=$TRASH/run TMPDIR=$TRASH/rtmp $GCK_BINDIR/recv/gpurecv"

started=
sshd_pid=
nets=
pgpm=
pgtmp=
feeder=
test_cleanup() {
	exec 7>&-
	test -n "$feeder" && kill $feeder 2>/dev/null
	test -n "$pgpm" && kill_tree $pgpm >/dev/null 2>&1
	test -n "$started" && kill_tree $started >/dev/null 2>&1
	for _p in $sshd_pid $nets; do kill_tree $_p >/dev/null 2>&1; done
	for _l in a b c; do ip link del gck$$$_l 2>/dev/null; done
	# The semaphores of a job that did not end (a failed test).
	for _f in "$TRASH"/*/sems; do
		test -f "$_f" || continue
		(cd /dev/shm && rm -f $(cat "$_f"))
	done
	test -n "$pgtmp" && rm -rf "$pgtmp"
	:
}

# bare COMMAND: runs COMMAND with none of our descriptors but 0, 1 and
# 2 (the test's log, make's), as a program started by hand would be.
# It execs: run it as (bare COMMAND &).
bare() {
	exec python3 -c 'import os, sys
os.closerange(3, 1 << 16)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

# tree_starts PID: "PID START" for PID and each of its descendants.
tree_starts() {
	for _p in $1 $(proc_descendants $1); do
		echo "$_p $(proc_field $_p 22)"
	done
}

# tree_restored FILE: each process of FILE (tree_starts) runs, restored.
tree_restored() {
	while read _p _s; do
		proc_restored $_p $_s || return 1
	done <"$1"
}

# move ROOT ARGS: gpuckpt --tcp-established ARGS -p ROOT | gpurestore:
# both succeed, quietly, and the restored root is ROOT.
move() {
	_r=$1
	shift
	{ "$GCKPT" --tcp-established "$@" -p $_r 2>ck.err; echo $? >ck.st; } |
	    "$GCKRESTORE" >rs.out 2>rs.err
	_st=$?
	cat >&2 ck.err rs.err
	test $_st -eq 0 && test "$(cat ck.st)" = 0 &&
	test_must_be_empty ck.err && test_must_be_empty rs.err &&
	echo $_r >expect && test_cmp expect rs.out
}

# lines FILE: its number of lines (0 if it does not exist).
lines() {
	if test -f "$1"; then wc -l <"$1"; else echo 0; fi
}

# more_lines FILE N [SECONDS]: waits (30 s) for N lines more in FILE.
more_lines() {
	_want=$(($(lines "$1") + $2))
	_i=0
	while test "$(lines "$1")" -lt $_want; do
		_i=$((_i + 1))
		if test $_i -gt $((${3:-30} * 10)); then
			echo >&2 "'$1' has $(lines "$1") lines, not $_want"
			return 1
		fi
		sleep 0.1
	done
}

# Other hosts, each on a network of its own.  Each script has addresses
# of its own in 198.18.0.0/15 (the block kept for tests of networks): a
# /30 for each host, here and there.
NET3=$(($$ % 256))
NET4=$(($$ / 256 % 16 * 16))

# nshost NAME N [--pid]: host NAME: a network namespace (with --pid, a
# PID namespace too, whose init is our reaper), its loopback up, joined
# to ours by a veth pair (gck$$NAME here), with the address
# 198.18.$NET3.$NET4+N+1 there and 198.18.$NET3.$NET4+N here (N is 1,
# 5 or 9).  Sets NAME_pid (the process to nsenter), NAME_addr (its
# address) and NAME_net (its network namespace).
nshost() {
	if test "$3" = --pid; then
		unshare --net --pid --fork --mount-proc "$GCK_TESTDIR/reaper" \
		    sleep 1000000 </dev/null >/dev/null 2>&1 &
		nets="$nets $!"
		_i=0
		while test -z "$(cat /proc/$!/task/*/children 2>/dev/null)"; do
			_i=$((_i + 1))
			test $_i -lt 100 || return 1
			sleep 0.05
		done
		_h=$(cat /proc/$!/task/*/children | tr -d ' ')
	else
		unshare --net sleep 1000000 </dev/null >/dev/null 2>&1 &
		_h=$!
		nets="$nets $_h"
		_i=0
		while test "$(readlink /proc/$_h/ns/net)" = \
		    "$(readlink /proc/self/ns/net)"; do
			_i=$((_i + 1))
			test $_i -lt 100 || return 1
			sleep 0.05
		done
	fi
	_here=198.18.$NET3.$((NET4 + $2))
	_there=198.18.$NET3.$((NET4 + $2 + 1))
	ip link add gck$$$1 type veth peer name eth0 netns $_h &&
	ip addr add $_here/30 dev gck$$$1 &&
	ip link set gck$$$1 up &&
	nsenter -t $_h -n sh -c "ip link set lo up &&
	    ip addr add $_there/30 dev eth0 && ip link set eth0 up" &&
	eval "$1_pid=$_h $1_addr=$_there $1_net=\$(readlink /proc/$_h/ns/net)"
}

# in_ns NAME PID: the PID here of the process that is PID in host
# NAME's PID namespace (lib.sh's ns_pid).
in_ns() {
	eval "ns_id=\$(readlink /proc/\$$1_pid/ns/pid)"
	ns_depth=$(awk '/^NSpid:/ { print NF - 1 }' /proc/self/status)
	ns_pid $2
}

# ---- redis ----------------------------------------------------------

# redis_start DIR BIND [nsenter ARGS]: a redis-server of DIR's own
# configuration on port 6379 of BIND, nothing saved (so that only its
# memory keeps what it holds), run by nsenter ARGS if given; sets RPID.
redis_start() {
	_d=$TRASH/$1
	_b=$2
	shift 2
	mkdir -p "$_d" &&
	cat >"$_d/redis.conf" <<-EOF &&
	bind $_b
	port 6379
	protected-mode $(test "$_b" = 127.0.0.1 && echo yes || echo no)
	save ""
	appendonly no
	daemonize no
	dir $_d
	pidfile $_d/pid
	logfile $_d/log
	EOF
	test $# -eq 0 || set -- nsenter "$@"
	(bare setsid "$@" redis-server "$_d/redis.conf" </dev/null >/dev/null \
	    2>&1 &)
	wait_for_line "$_d/pid" . 10 &&
	RPID=$(cat "$_d/pid") &&
	started="$started $RPID"
}

# rcli HOST ARGS: redis-cli to port 6379 of HOST.
rcli() {
	_h=$1
	shift
	redis-cli -h $_h -p 6379 "$@"
}

# rwait HOST: waits up to 10 s for redis there to answer.
rwait() {
	_i=0
	while test "$(rcli $1 PING 2>/dev/null)" != PONG; do
		_i=$((_i + 1))
		test $_i -lt 100 || return 1
		sleep 0.1
	done
}

# KEYS keys, set before anything moves: key:N holds value-(N * 7919).
KEYS=200
rset() {
	awk -v n=$KEYS 'BEGIN { for (i = 1; i <= n; i++)
	    printf "SET key:%d value-%d\n", i, i * 7919 }' |
	    rcli $1 >set.out &&
	test "$(grep -c '^OK$' set.out)" = $KEYS
}

# keys_there HOST: redis there holds those keys, with their values, and
# the counter: KEYS + 1 keys.
keys_there() {
	awk -v n=$KEYS 'BEGIN { for (i = 1; i <= n; i++)
	    print "value-" i * 7919 }' >keys.expect &&
	rcli $1 MGET $(awk -v n=$KEYS 'BEGIN { for (i = 1; i <= n; i++)
	    print "key:" i }') >keys.actual &&
	test_cmp keys.expect keys.actual &&
	test "$(rcli $1 DBSIZE)" = $((KEYS + 1))
}

# client DIR HOST: the client (respclient.py), counting on redis at HOST
# (DIR/addr) into DIR/count; sets CPID once it has counted to 10.
client() {
	echo "$2 6379" >"$TRASH/$1/addr" &&
	(bare setsid python3 "$GCK_SRCDIR/respclient.py" "$TRASH/$1/addr" \
	    "$TRASH/$1/count" counter </dev/null >"$TRASH/$1/client.log" 2>&1 &)
	wait_for_line "$TRASH/$1/count.pid" . 10 &&
	CPID=$(cat "$TRASH/$1/count.pid") &&
	started="$started $CPID" &&
	more_lines "$TRASH/$1/count" 10
}

# reply first|last port|value FILE: the client's local port, or the
# value, of the first or the last reply in FILE.
reply() {
	case $2 in
	port)	_f=1 ;;
	*)	_f=2 ;;
	esac
	case $1 in
	first)	head -n 1 "$3" ;;
	*)	tail -n 1 "$3" ;;
	esac | cut -d" " -f$_f
}

# one_connection FILE [FIRST]: the replies of FILE came on one connection
# (one local port, no reset), and went FIRST (1), FIRST + 1, ... with
# none missed or repeated.
one_connection() {
	awk -v first=${2:-1} '
	NR == 1 { port = $1 }
	$1 == "reset" || $1 != port || $2 != first + NR - 1 {
		print "reply " NR ": \"" $0 "\"; port " port \
		    ", value " first + NR - 1 " expected"
		bad = 1
		exit
	}
	END { exit bad }' "$1" >&2
}

test_expect_success 'redis-server on 127.0.0.1:6379, holding 200 keys, and a client counting on one connection' '
	if test -n "$(ss -Htln "sport = :6379")"; then
		echo >&2 "port 6379 is taken:" && ss -tlnp "sport = :6379" >&2
		false
	fi &&
	redis_start r1 127.0.0.1 &&
	rwait 127.0.0.1 &&
	rset 127.0.0.1 &&
	client r1 127.0.0.1 &&
	one_connection r1/count
'

test_expect_success 'gpuckpt --tcp-established | gpurestore: redis anew, the client counting on, on the same connection' '
	START=$(proc_field $RPID 22) &&
	n=$(lines r1/count) &&
	move $RPID &&
	proc_restored $RPID $START &&
	more_lines r1/count 25 &&
	one_connection r1/count &&
	test $n -ge 10
'

test_expect_success 'from a file: gpuckpt --tcp-established -o, then gpurestore FILE' '
	START=$(proc_field $RPID 22) &&
	"$GCKPT" --tcp-established -p $RPID -o redis.gck 2>err &&
	test_must_be_empty err &&
	wait_gone $RPID &&
	n=$(lines r1/count) &&
	"$GCKRESTORE" redis.gck >out 2>err &&
	test_must_be_empty err &&
	echo $RPID >expect &&
	test_cmp expect out &&
	proc_restored $RPID $START &&
	more_lines r1/count 25 &&
	one_connection r1/count
'

test_expect_success 'redis-cli: the counter is the client'"'"'s last reply, and the keys are all there' '
	kill_tree $CPID &&
	test "$(rcli 127.0.0.1 GET counter)" = "$(reply last value r1/count)" &&
	keys_there 127.0.0.1 &&
	{ rcli 127.0.0.1 SHUTDOWN NOSAVE; wait_gone $RPID; }
'

# Another host, where the connection cannot be restored: A, the source,
# and B, each a network namespace of its own, B a PID namespace too
# (where the source's PIDs are free, as on another machine).  Redis
# listens on every address of its host, so that it is found at B's
# after the move; the client, here, is told that address (its addr
# file) and connects to it when its connection is reset.
test_expect_success 'hosts A and B, each on a network of its own, B in a PID namespace of its own' '
	nshost a 1 &&
	nshost b 5 --pid &&
	test "$a_net" != "$b_net" &&
	test "$a_net" != "$(readlink /proc/self/ns/net)"
'

test_expect_success 'redis on A (port 6379), 200 keys, and a client counting' '
	redis_start r2 0.0.0.0 -t $a_pid -n &&
	rwait $a_addr &&
	rset $a_addr &&
	client r2 $a_addr
'

# Dumped with --tcp-close, the connection ends with redis on A, which
# the client sees; the image says so, and the restore on B closes it.
test_expect_success 'gpuckpt --tcp-close on A | gpurestore on B: redis runs on B, its keys there, the connection dropped' '
	START=$(proc_field $RPID 22) &&
	{ nsenter -t $a_pid -n "$GCKPT" --tcp-close -p $RPID 2>ck.err;
	  echo $? >ck.st; } |
	    nsenter -t $b_pid -p -m -n "$GCKRESTORE" >rs.out 2>rs.err &&
	cat >&2 ck.err rs.err &&
	test "$(cat ck.st)" = 0 &&
	test_must_be_empty rs.err &&
	echo $RPID >expect &&
	test_cmp expect rs.out &&
	# There, its PID is free: the source waits, stopped, to be ended.
	test_grep "left stopped" ck.err &&
	wait_stopped $RPID &&
	echo "$b_addr 6379" >r2/addr &&
	kill -KILL $RPID &&
	wait_gone $RPID &&
	RB=$(in_ns b $RPID) &&
	test -n "$RB" &&
	proc_restored $RB $START &&
	test "$(readlink /proc/$RB/ns/net)" = "$b_net" &&
	rwait $b_addr &&
	keys_there $b_addr &&
	# The connection the client had is gone from it.
	rcli $b_addr CLIENT LIST >clients &&
	cat >&2 clients &&
	test_grep " cmd=client" clients &&
	old=$(reply first port r2/count) &&
	! grep " addr=[^ ]*:$old " clients
'

test_expect_success 'the client, its connection reset, counts on with B from where it was' '
	wait_for_line r2/count "^reset " 15 &&
	more_lines r2/count 25 &&
	kill_tree $CPID &&
	sed "/^reset /,\$d" r2/count >before &&
	sed "1,/^reset /d" r2/count >after &&
	one_connection before &&
	last=$(reply last value before) &&
	first=$(reply first value after) &&
	# The INCR in flight when A stopped may have counted there, its
	# reply lost with the connection: one more, not any other.
	{ test $first = $((last + 1)) || test $first = $((last + 2)); } &&
	one_connection after $first &&
	test "$(reply first port before)" != "$(reply first port after)" &&
	test "$(rcli $b_addr GET counter)" = "$(reply last value after)" &&
	{ rcli $b_addr SHUTDOWN NOSAVE; wait_gone $RB; }
'

# ---- PostgreSQL -----------------------------------------------------

# criu reads the resource limits of every process it dumps: another
# user's (postgres') only with CAP_SYS_RESOURCE (gpuckpt(1)).
cap_sys_resource() {
	_e=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
	test $((0x$_e >> 24 & 1)) = 1
}

# PGRUN COMMAND: how initdb and the server run.  As user postgres where
# root has CAP_SYS_RESOURCE; else, as on hosts where root has not (this
# kind of machine), as root, with pgroot.so preloaded to tell them they
# are postgres (pgroot.c): the server is the same.
if cap_sys_resource; then
	PGRUN="setpriv --reuid=postgres --regid=postgres --init-groups"
else
	PGRUN="env LD_PRELOAD=$GCK_TESTDIR/pgroot.so PGROOT_UID=$(id -u postgres)"
fi

# asuser COMMAND: COMMAND as initdb and the server run.
asuser() {
	$PGRUN "$@"
}

# psql_at HOST ARGS: a new psql session to the cluster at HOST (an
# address, or the directory of its unix socket).
psql_at() {
	_h=$1
	shift
	"$PGBIN/psql" -X -q -At -h "$_h" -p $PGPORT -U postgres -d postgres \
	    -v ON_ERROR_STOP=1 "$@"
}

# feed N: feeds psql's held session (fd 7) N inserts, 100 a second, the
# next values of t after those already fed (pg.fed); in the background.
feed() {
	_from=$(($(cat pg.fed) + 1))
	_to=$((_from + $1 - 1))
	echo $_to >pg.fed
	(
		_n=$_from
		while test $_n -le $_to; do
			echo "INSERT INTO t VALUES ($_n);" >&7
			_n=$((_n + 1))
			sleep 0.01
		done
	) &
	feeder=$!
}

# inserted N: psql has said it inserted N rows (30 s).
inserted() {
	_i=0
	while test "$(grep -c "^INSERT 0 1\$" psql.out)" -lt $1; do
		_i=$((_i + 1))
		if test $_i -gt 300; then
			echo >&2 "psql inserted $(grep -c "^INSERT 0 1\$" psql.out) rows, not $1"
			return 1
		fi
		sleep 0.1
	done
}

# conn: asks the held session its client port and backend PID; sets CONN
# to "PORT PID" once psql has answered.
conn() {
	_k=$(($(grep -c "^conn " psql.out) + 1))
	echo "SELECT 'conn ' || inet_client_port() || ' ' || pg_backend_pid();" >&7
	_i=0
	while test "$(grep -c "^conn " psql.out)" -lt $_k; do
		_i=$((_i + 1))
		test $_i -lt 300 || { echo >&2 "psql does not answer"; return 1; }
		sleep 0.1
	done
	CONN=$(grep "^conn " psql.out | tail -n 1 | cut -d" " -f2-)
}

pg_test() {
	test_expect_success "$@"
}

# Its data directory in ours, if postgres can reach it there, else in
# a directory of /tmp of its own, removed at the end.
pg_test 'a PostgreSQL cluster of its own on 127.0.0.1, in an IPC namespace of its own, and psql holding one connection' '
	chmod 711 "$TRASH" &&
	mkdir pg &&
	chown postgres: pg &&
	PGDIR=$TRASH/pg &&
	if ! asuser test -w "$PGDIR"; then
		pgtmp=$(mktemp -d /tmp/gck-pg.XXXXXX) &&
		chmod 755 "$pgtmp" &&
		PGDIR=$pgtmp/pg &&
		mkdir "$PGDIR" &&
		chown postgres: "$PGDIR"
	fi &&
	mkdir -m 700 "$PGDIR/data" &&
	chown postgres: "$PGDIR/data" &&
	asuser "$PGBIN/initdb" -D "$PGDIR/data" -U postgres --auth=trust \
	    --no-sync -E UTF8 >initdb.out 2>&1 &&
	PGPORT=$(python3 -c "import socket; s = socket.socket()
s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])") &&
	# postgres always keeps a small SysV segment attached, which criu
	# dumps only in an IPC namespace of its own.
	(bare setsid unshare --ipc $PGRUN "$PGBIN/postgres" -D "$PGDIR/data" \
	    -p $PGPORT \
	    -c listen_addresses=127.0.0.1 -c unix_socket_directories="$PGDIR" \
	    -c shared_buffers=16MB -c max_connections=20 -c huge_pages=off \
	    -c dynamic_shared_memory_type=mmap -c fsync=off \
	    -c logging_collector=off </dev/null >>"$PGDIR/log" 2>&1 &) &&
	wait_for_line "$PGDIR/data/postmaster.pid" "^ready" 30 &&
	pgpm=$(head -n 1 "$PGDIR/data/postmaster.pid") &&
	proc_running $pgpm &&
	test "$(readlink /proc/$pgpm/ns/ipc)" != "$(readlink /proc/self/ns/ipc)" &&
	psql_at 127.0.0.1 -c "CREATE TABLE t (i int)" &&
	mkfifo pg.in &&
	exec 7<>pg.in &&
	(bare "$PGBIN/psql" -X -h 127.0.0.1 -p $PGPORT -U postgres \
	    -d postgres -At <pg.in >psql.out 2>psql.err &) &&
	echo 0 >pg.fed &&
	conn &&
	CONN0=$CONN &&
	feed 200 &&
	inserted 20
'

pg_test 'gpuckpt --tcp-established | gpurestore: the postmaster and its children anew, while psql inserts' '
	tree_starts $pgpm >pg.starts &&
	test "$(wc -l <pg.starts)" -ge 6 &&
	conn_pid=$(echo $CONN0 | cut -d" " -f2) &&
	grep "^$conn_pid " pg.starts &&
	test $(grep -c "^INSERT 0 1\$" psql.out) -lt 200 &&
	move $pgpm &&
	tree_restored pg.starts &&
	wait $feeder &&
	feed 50 &&
	wait $feeder &&
	feeder= &&
	inserted 250
'

pg_test 'every row there; the held connection the same; new connections over TCP and the unix socket' '
	conn &&
	test "$CONN" = "$CONN0" &&
	test_must_be_empty psql.err &&
	echo "250|250|1|250" >expect &&
	q="SELECT count(*), count(DISTINCT i), min(i), max(i) FROM t" &&
	psql_at 127.0.0.1 -c "$q" >actual &&
	test_cmp expect actual &&
	psql_at "$PGDIR" -c "$q" >actual &&
	test_cmp expect actual &&
	psql_at 127.0.0.1 -c "INSERT INTO t VALUES (251)" &&
	echo 251 >expect &&
	psql_at "$PGDIR" -c "SELECT count(*) FROM t" >actual &&
	test_cmp expect actual &&
	exec 7>&- &&
	kill -INT $pgpm &&
	wait_gone $pgpm &&
	pgpm=
'

# What follows must not inherit psql's FIFO, whatever happened above.
exec 7>&-

# ---- torch.distributed ----------------------------------------------

# Every run takes as many steps as the reference: the sleeps between
# them change nothing but how long it runs.
STEPS=200

# job NAME [SLEEP]: ddptrain.py in TRASH/NAME, STEPS steps with a sleep
# of SLEEP seconds (0.02) after each; sets JOB (its root) once rank 0 has
# taken 30 steps.
job() {
	mkdir "$TRASH/$1" &&
	(bare setsid "$TORCHPY" "$GCK_SRCDIR/ddptrain.py" "$TRASH/$1" $STEPS \
	    ${2:-0.02} </dev/null >>"$TRASH/$1/log" 2>&1 &)
	wait_for_line "$TRASH/$1/pid" . 60 &&
	JOB=$(cat "$TRASH/$1/pid") &&
	started="$started $JOB" &&
	wait_for_line "$TRASH/$1/steps" "^step 30\$" 60
}

# laststep NAME: the last step the job NAME wrote.
laststep() {
	tail -n 1 "$TRASH/$1/steps" | sed "s/^step //"
}

# finished NAME: the job NAME took its last step and saved its weights
# (60 s), which are the reference's, bit for bit, and it removed its
# semaphores from /dev/shm.
finished() {
	wait_for_line "$TRASH/$1/steps" "^step $STEPS\$" 60 &&
	_i=0 &&
	while ! test -f "$TRASH/$1/final.pt"; do
		_i=$((_i + 1))
		test $_i -lt 300 || { cat >&2 "$TRASH/$1/log"; return 1; }
		sleep 0.1
	done &&
	"$TORCHPY" "$GCK_SRCDIR/ddpverify.py" ref/final.pt "$TRASH/$1/final.pt" &&
	for _s in $(cat "$TRASH/$1/sems"); do
		test ! -e "/dev/shm/$_s" || {
			echo >&2 "/dev/shm/$_s left"; return 1; }
	done
}

# steps_from NAME N: the steps of job NAME from its line N on go 1 by
# 1 to STEPS, none missed or repeated.
steps_from() {
	sed -n "$2,\$p" "$TRASH/$1/steps" | awk -v s=$STEPS '
	NR == 1 { first = $2 }
	$2 != first + NR - 1 { print "step " $2 " after " $2 - 1; bad = 1; exit }
	END { if (!bad && $2 != s) { print "ends at step " $2; bad = 1 }
	    exit bad }' >&2
}

test_expect_success 'the training job, not interrupted: the reference weights' '
	mkdir ref &&
	"$TORCHPY" "$GCK_SRCDIR/ddptrain.py" "$TRASH/ref" $STEPS 0 >ref/log 2>&1 &&
	test -f ref/final.pt &&
	steps_from ref 1 &&
	head -n 1 ref/steps >first &&
	echo "step 1" >expect &&
	test_cmp expect first
'

test_expect_success 'the job moved mid-run through gpuckpt --tcp-established | gpurestore: the same weights' '
	job ta &&
	tree_starts $JOB >ta.starts &&
	test "$(wc -l <ta.starts)" = 4 &&
	move $JOB &&
	tree_restored ta.starts &&
	test "$(laststep ta)" -lt $STEPS &&
	finished ta &&
	steps_from ta 1
'

test_expect_success 'a snapshot mid-run (gpuckpt -R), the job killed, restored from it: the same weights' '
	job tb &&
	START=$(proc_field $JOB 22) &&
	s0=$(laststep tb) &&
	"$GCKPT" -R --tcp-established -p $JOB -o snap.gck 2>err &&
	test_must_be_empty err &&
	s1=$(laststep tb) &&
	proc_unharmed $JOB $START &&
	more_lines tb/steps 10 &&
	kill_tree $JOB &&
	test "$(laststep tb)" -lt $STEPS &&
	n=$(lines tb/steps) &&
	"$GCKRESTORE" snap.gck >out 2>err &&
	test_must_be_empty err &&
	echo $JOB >expect &&
	test_cmp expect out &&
	proc_restored $JOB $START &&
	finished tb &&
	# It goes on from the snapshot: from no step before it, nor after.
	k=$(sed -n "$((n + 1))s/^step //p" tb/steps) &&
	test $k -gt $s0 && test $k -le $((s1 + 1)) &&
	steps_from tb $((n + 1))
'

# The host of gpusend: an sshd in a PID namespace, as in hosts.sh, and
# in a network namespace too.  The job listens (its rank 0 serves the
# TCPStore), and the source, stopped, keeps its port until the restore
# there has said it runs: a host that shared our network could not bind
# it again.
test_expect_success 'host C, on a network of its own, in a PID namespace of its own, its sshd listening there' '
	mkdir home rtmp &&
	ssh-keygen -q -t ed25519 -N "" -C gck-host -f hostkey &&
	ssh-keygen -q -t ed25519 -N "" -C gck-user -f userkey &&
	cp userkey.pub authorized_keys &&
	nshost c 9 --pid &&
	SSHD_ADDR=$c_addr start_sshd nsenter -t $c_pid -p -m -n &&
	echo "[$c_addr]:$port $(cat hostkey.pub)" >known_hosts
'

# csend ARGS: gpusend ARGS to root@C.
csend() {
	HOME=$TRASH/home "$GCKSEND" -P "$port" -i "$TRASH/userkey" \
	    -o IdentityAgent=none -o UserKnownHostsFile="$TRASH/known_hosts" \
	    --remote-path "$RPATH" "$@" root@$c_addr
}

# Its pre-copy rounds take a few seconds: the job runs slower, to be
# still running when they end.
test_expect_success 'the job moved mid-run with gpusend --live --tcp-established to C: the same weights' '
	job tc 0.05 &&
	START=$(proc_field $JOB 22) &&
	csend --live --tcp-established -p $JOB >out 2>err &&
	cat err &&
	echo $JOB >expect &&
	test_cmp expect out &&
	wait_gone $JOB &&
	h=$(in_ns c $JOB) &&
	test -n "$h" &&
	proc_restored $h $START &&
	test "$(readlink /proc/$h/ns/net)" = "$c_net" &&
	test "$(laststep tc)" -lt $STEPS &&
	finished tc &&
	steps_from tc 1
'

# strays: the processes under our subreaper but outside this shell's
# own (its children and theirs): what went on running detached.
strays() {
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v root=$GCK_REAPER -v me=$$ '
	{ pid = $1; sub(/.*\) /, ""); parent[pid] = $2 }
	END {
		n = 1; q[1] = root
		for (i = 1; i <= n; i++)
			for (p in parent)
				if (parent[p] == q[i] && p != me) { q[++n] = p; print p }
	}'
}

# What the tests started goes; then nothing may be left: no process of
# ours, no network namespace or link.  (A job that ended has removed its
# semaphores, as finished checks; the cleanup removes those of a job
# that a failed test left.)
test_expect_success 'nothing left: no process, network namespace or link' '
	for p in $sshd_pid $nets $started; do kill_tree $p || return 1; done &&
	sshd_pid= && nets= && started= &&
	strays >left &&
	{ test_must_be_empty left || { ps -f $(cat left) >&2; false; }; } &&
	_i=0 &&
	while ip -o link show | grep " gck$$[abc][@:]"; do
		_i=$((_i + 1))
		test $_i -lt 50 || return 1
		sleep 0.1
	done
'

test_done
