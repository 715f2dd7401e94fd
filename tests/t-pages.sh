#!/bin/sh
test_description='memory written anywhere: incremental images, snapshots and series store only the pages that changed (format 3)'
. "$GCK_SRCDIR/lib.sh"

require_criu
require_python

started=
test_cleanup() {
	test -n "$started" && kill_tree $started >/dev/null 2>&1
}

start() {
	start_workload "$@" || return 1
	started="$started $WPID"
}


# kinds IMAGE: how many of its entries of memory are stored whole,
# references and patches ("S R P"), and the bytes the patches store.
kinds() {
	_k=$TRASH/$(basename "$1")
	zstd -dc "$1" | tar -xOf - gpuckpt.sums >"$_k.sums" &&
	zstd -dc "$1" | tar -tvf - >"$_k.list" &&
	python3 - "$_k.sums" "$_k.list" <<-\EOF
	import sys, json
	es = [e for e in json.load(open(sys.argv[1]))["entries"]
	      if e["name"].startswith("criu/pages-")]
	size = {}
	for line in open(sys.argv[2]):
	    f = line.split()
	    size[f[-1]] = int(f[2])
	p = [e for e in es if e.get("patch")]
	print(len([e for e in es if not e.get("ref") and not e.get("patch")]),
	      len([e for e in es if e.get("ref")]), len(p),
	      sum(size[e["name"]] for e in p))
	EOF
}

# size FILE
size() {
	wc -c <"$1" | tr -d ' '
}

# An image over A after 5% of the pages were rewritten, one here, one
# there (PATTERN pages) or as a heap's objects (heap): at most LIMIT
# thousandths of a full one, of patches, and its restore given A has
# every page.
incremental() {
	_pat=$1 _limit=$2
	test_expect_success "$_pat: an image with --parent after 5% rewritten is small, of patches" "
		start $_pat -m 64 -p $_pat -r 5 &&
		test_status 0 \"\$GCKPT\" --leave-running -p \$WPID -o $_pat-A.gck &&
		rewrite &&
		test_status 0 \"\$GCKPT\" -v --parent=$_pat-A.gck -p \$WPID \
		    -o $_pat-B.gck 2>err &&
		a=\$(size $_pat-A.gck) && b=\$(size $_pat-B.gck) &&
		echo \"full \$a B, incremental \$b B\" &&
		test \$((b * 1000)) -le \$((a * $_limit)) &&
		set -- \$(kinds $_pat-B.gck) && echo \"stored \$1, refs \$2, patches \$3 storing \$4 B\" &&
		test \$3 -gt 0 && test \$4 -gt 0 &&
		test_status 0 \"\$GCKINSPECT\" --verify --parent=$_pat-A.gck $_pat-B.gck
	"
	test_expect_success "$_pat: its restore given the parent: every page, the counter goes on" "
		test_status 0 \"\$GCKRESTORE\" --parent=$_pat-A.gck $_pat-B.gck \
		    >out 2>err &&
		test_must_be_empty err &&
		verify_now \$WPID &&
		before=\$VCOUNTER && sleep 0.3 &&
		verify_now \$WPID && test \$VCOUNTER -gt \$before &&
		kill_tree \$WPID
	"
	test_expect_success "$_pat: flattened, it is the whole image of that memory" "
		test_status 0 \"\$GCKINSPECT\" --flatten=$_pat-F.gck \
		    --parent=$_pat-A.gck $_pat-B.gck &&
		set -- \$(kinds $_pat-F.gck) && test \$2 -eq 0 && test \$3 -eq 0 &&
		mkdir $_pat-x && test_status 0 \"\$GCKINSPECT\" -x $_pat-x \
		    $_pat-F.gck &&
		test_status 0 \"\$GCKRESTORE\" $_pat-F.gck >out 2>err &&
		verify_now \$WPID &&
		kill_tree \$WPID
	"
}

incremental pages 120
incremental heap 300

test_expect_success 'pages: a snapshot of a tree rewriting 5% a second, one page here, one there' '
	start snap -m 64 -p pages -w 5 &&
	verify_workload $WPID &&
	C0=$VCOUNTER &&
	test_status 0 "$GCKPT" -v -R -p $WPID -o snap.gck 2>err &&
	test_grep "^gpuckpt: round 1: " err &&
	set -- $(kinds snap.gck) && echo "stored $1, refs $2, patches $3" &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" snap.gck >out 2>err &&
	test_must_be_empty err &&
	verify_workload $WPID &&
	test $VCOUNTER -gt $C0 &&
	kill_tree $WPID
'

test_expect_success 'heap: a series of it, each incremental small, the newest restored' '
	start series -m 64 -p heap -w 2 &&
	test_status 0 "$GCKPT" --series=S --every=1 --count=4 -p $WPID \
	    2>err &&
	ls S/*.gck >list && test_line_count list 4 &&
	full=$(size "$(sed -n 1p list)") &&
	for f in $(sed 1d list); do
		n=$(size "$f") && echo "$f: $n B of $full" &&
		test $((n * 4)) -lt $full &&
		set -- $(kinds "$f") && test $3 -gt 0 || return 1
	done &&
	test_status 0 "$GCKINSPECT" --verify S >out &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" S >out 2>err &&
	test_grep "^gpurestore: restored snapshot .$(sed -n 4p list)." err &&
	verify_workload $WPID &&
	kill_tree $WPID
'

# Each snapshot's rounds read only what changed since the one before,
# though that one refers to its own parent for most of its memory: the
# pages it lists are found in the chain behind it.
test_expect_success 'pages: the rounds of each snapshot of a series find the pages of the last' '
	start rounds -m 64 -p pages -w 1 &&
	test_status 0 "$GCKPT" -v --series=R --every=1 --count=4 -p $WPID \
	    2>err &&
	grep "^gpuckpt: round 1: " err >r1 && test_line_count r1 4 &&
	sed 1d r1 | while read -r _ _ _ n _ _ _ _ m _; do
		echo "round 1: $m new of $n" &&
		test $((m * 8)) -lt $n || return 1
	done &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" R >out 2>err &&
	verify_workload $WPID &&
	kill_tree $WPID
'

# criu, run by gpuckpt -R once its rounds are done, has the workload
# rewrite pages first: they change after the last round read them and
# before the tree stops, and the snapshot must hold them as they are.
test_expect_success 'pages changed between the last round and the stop are not lost' '
	start late -m 64 -p pages -r 3 &&
	fake_criu rewrite-first &&
	GCK_CRIU=$TRASH/fakecriu test_status 0 "$GCKPT" -v -R -p $WPID \
	    -o late.gck 2>err &&
	test_grep "^gpuckpt: pre-copy ended" err &&
	NEWSUM=$(grep "^rewrote " "$WSTATUS" | tail -n 1 |
	    sed "s/^rewrote sum=\([0-9a-f]*\).*/\1/") &&
	test -n "$NEWSUM" &&
	kill_tree $WPID &&
	test_status 0 "$GCKRESTORE" late.gck >out 2>err &&
	verify_now $WPID &&
	kill_tree $WPID
'

test_expect_success 'nothing left behind' '
	test -z "$(ls -A "$TMPDIR")"
'

test_done
