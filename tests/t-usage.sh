#!/bin/sh
test_description='command lines, usage errors and refused input'
. "$GCK_SRCDIR/lib.sh"

for prog in ckpt/gpuckpt restore/gpurestore send/gpusend recv/gpurecv \
    inspect/gpuinspect; do
	name=${prog#*/}
	bin=$GCK_BINDIR/$prog

	for opt in --help -h; do
		test_expect_success "$name $opt" "
			test_status 0 '$bin' $opt >out 2>err &&
			test_grep '^usage: $name ' out &&
			test_must_be_empty err
		"
	done

	for opt in --version -V; do
		test_expect_success "$name $opt" "
			test_status 0 '$bin' $opt >out 2>err &&
			echo '$name (gpuckpt) 0.1.0' >expect &&
			test_cmp expect out &&
			test_must_be_empty err
		"
	done

	test_expect_success "$name rejects an unknown option" "
		test_status 2 '$bin' --no-such-option >out 2>err &&
		test_grep '^usage: $name ' err &&
		test_must_be_empty out
	"
done

# A pid that existed a moment ago and is gone now.
sh -c 'exit 0' &
deadpid=$!
wait $deadpid

test_expect_success 'gpuckpt without -p' '
	test_status 2 "$GCKPT" >out 2>err &&
	test_grep "^usage: gpuckpt " err &&
	test_must_be_empty out
'

for pid in abc 12x "" -5; do
	test_expect_success "gpuckpt -p '$pid'" "
		test_status 2 \"\$GCKPT\" -p '$pid' >out 2>err &&
		test_grep '^gpuckpt: \\|^usage: ' err &&
		test_must_be_empty out
	"
done

for c in gzip zstd:0 zstd:20 zstd:abc zstd: zstd:3x "" none:1; do
	test_expect_success "gpuckpt --compress='$c'" "
		test_status 2 \"\$GCKPT\" --compress='$c' -p \$deadpid >out 2>err &&
		test_grep '^gpuckpt: \\|^usage: ' err &&
		test_must_be_empty out
	"
done

test_expect_success 'gpuckpt -R and -s together' '
	test_status 2 "$GCKPT" -R -s -p $deadpid >out 2>err &&
	test_grep "^gpuckpt: \\|^usage: " err &&
	test_must_be_empty out
'

for prog in ckpt/gpuckpt restore/gpurestore send/gpusend; do
	name=${prog#*/}
	bin=$GCK_BINDIR/$prog

	test_expect_success "$name --help names -q and --stats" "
		test_status 0 '$bin' --help >out 2>err &&
		test_grep '^usage: $name \\[-h[a-z]*q[A-Za-z]*\\] ' out &&
		test_grep '\\[--stats\\[=text|json\\]\\]' out
	"

	test_expect_success "$name --stats=yaml, --stats=" "
		test_status 2 '$bin' --stats=yaml -p 1 x >out 2>err &&
		test_must_be_empty out &&
		test_grep '^$name: invalid --stats .yaml.: use text or json\$' err &&
		test_status 2 '$bin' --stats= -p 1 x >out 2>err &&
		test_must_be_empty out &&
		test_grep '^$name: invalid --stats ..: use text or json\$' err
	"
done

test_expect_success 'gpuckpt --stats takes no next word: json is an operand' '
	test_status 2 "$GCKPT" --stats json -p $deadpid >out 2>err &&
	test_grep "^usage: gpuckpt " err &&
	test_must_be_empty out
'

test_expect_success 'gpuckpt -q still says why it failed' '
	test_status 1 "$GCKPT" -q -p $deadpid -o x.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: " err &&
	test_status 1 "$GCKPT" --quiet --stats=json -p $deadpid -o x.gck \
	    >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	! test -e x.gck
'

test_expect_success '--stats with --suspend or --resume' '
	test_status 2 "$GCKPT" --suspend --stats -p $deadpid >out 2>err &&
	test_grep "^gpuckpt: --suspend makes no image: it takes no .*--stats" err &&
	test_status 2 "$GCKRESTORE" --resume --stats -p $deadpid >out 2>err &&
	test_grep "^gpurestore: --resume takes -p pid, no image and no .*--stats" err &&
	test_must_be_empty out
'

test_expect_success 'gpuckpt --leave-running and --stop together' '
	test_status 2 "$GCKPT" --leave-running --stop -p $deadpid >out 2>err &&
	test_must_be_empty out
'

test_expect_success 'gpuckpt refuses an operand' '
	test_status 2 "$GCKPT" -p $deadpid extra >out 2>err &&
	test_must_be_empty out
'

# series_refused LINE ARGS...: gpuckpt ARGS exits 2 with LINE alone.
series_refused() {
	_line=$1
	shift
	test_status 2 "$GCKPT" "$@" >out 2>err &&
	test_must_be_empty out &&
	echo "gpuckpt: $_line" >expect &&
	test_cmp expect err
}

serieswhy="--series takes no -k, -o, --parent, -s or --suspend: it leaves the tree running, and names and chains its images itself"
for opts in -k --kill -s --stop --suspend "-o img.gck" "-o -" \
    "--parent=img.gck"; do
	test_expect_success "gpuckpt --series with $opts: one line" "
		series_refused \"\$serieswhy\" --series=s $opts -p \$deadpid &&
		test ! -e s
	"
done

test_expect_success 'gpuckpt --every, --count, --keep, --full-every without --series' '
	for o in --every=1 --count=2 --keep=3 --full-every=2; do
		series_refused "--count, --every, --full-every and --keep are for --series" \
		    $o -p $deadpid -o img.gck || return 1
	done &&
	test ! -e img.gck
'

test_expect_success 'gpuckpt --series --count without --every' '
	series_refused "--count is for --every" --series=s --count=2 \
	    -p $deadpid &&
	series_refused "--series needs a directory" --series= -p $deadpid &&
	series_refused "the interval of --every must be more than 0" \
	    --series=s --every=0 -p $deadpid &&
	test ! -e s
'

for o in --keep=0 --keep=x --full-every=0 --full-every=1001 --count=0 \
    --every=-1 --every=x; do
	test_expect_success "gpuckpt --series $o: a usage error" "
		test_status 2 \"\$GCKPT\" --series=s $o -p \$deadpid >out 2>err &&
		test_must_be_empty out &&
		test_grep '^gpuckpt: ' err &&
		test ! -e s
	"
done

test_expect_success 'gpuckpt --series of a process that does not exist' '
	test_status 1 "$GCKPT" --series=s -p $deadpid >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: " err &&
	test ! -e s/index.json &&
	test -z "$(ls s)"
'

test_expect_success 'gpurestore and gpuinspect of a directory that is no series' '
	mkdir -p plain &&
	test_status 1 "$GCKRESTORE" plain >out 2>err &&
	test_must_be_empty out &&
	echo "gpurestore: '"'"'plain'"'"' is not a snapshot series: it has no index.json" >expect &&
	test_cmp expect err &&
	test_status 1 "$GCKINSPECT" plain >out 2>err &&
	test_must_be_empty out &&
	echo "gpuinspect: '"'"'plain'"'"' is not a snapshot series: it has no index.json" >expect &&
	test_cmp expect err
'

test_expect_success 'gpuinspect -x and -d of a directory, --parent with one' '
	test_status 2 "$GCKINSPECT" -x out.d plain >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_status 2 "$GCKINSPECT" -t --parent=x plain >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_status 2 "$GCKINSPECT" -j -x out.d plain >out 2>err &&
	test_must_be_empty out
'

test_expect_success 'gpuckpt -p of a process that does not exist' '
	test_status 1 "$GCKPT" -p $deadpid -o img.gck >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: .*no such process" err &&
	test ! -e img.gck &&
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'gpuckpt -p of a missing process, to stdout' '
	test_status 1 "$GCKPT" -p $deadpid >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpuckpt: .*no such process" err
'

if command -v script >/dev/null; then
	test_expect_success 'gpuckpt refuses to write to a terminal' '
		(setsid sh -c "echo \$\$ >sleep.pid; exec sleep 300" \
		    </dev/null >/dev/null 2>&1 &) &&
		wait_for_line sleep.pid "^[0-9]" &&
		spid=$(cat sleep.pid) &&
		script -qec "exec \"$GCKPT\" -p $spid" /dev/null \
		    </dev/null >out 2>err
		st=$?
		kill_tree $spid
		test $st -eq 1 &&
		test_grep "gpuckpt: refusing to write an image to a terminal" \
		    out
	'
else
	test_expect_success 'script(1) for the terminal test' '
		test "$CI" != true
	'
fi

test_expect_success 'gpurestore of empty input' '
	test_status 1 "$GCKRESTORE" </dev/null >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: empty input: no image" err
'

test_expect_success 'gpurestore - of empty input' '
	test_status 1 "$GCKRESTORE" - </dev/null >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: empty input" err
'

test_expect_success 'gpurestore of an empty file' '
	: >empty &&
	test_status 1 "$GCKRESTORE" empty >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: empty input" err
'

test_expect_success 'gpurestore of a text file' '
	test_status 1 "$GCKRESTORE" /etc/passwd >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: not a gpuckpt image" err
'

test_expect_success 'gpurestore of garbage on stdin' '
	head -c 100000 /dev/urandom >garbage &&
	test_status 1 "$GCKRESTORE" <garbage >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: not a gpuckpt image" err
'

test_expect_success 'gpurestore of a file that does not exist' '
	test_status 1 "$GCKRESTORE" no-such-file >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpurestore: .*no-such-file" err
'

test_expect_success 'gpurestore with two operands' '
	test_status 2 "$GCKRESTORE" a b >out 2>err &&
	test_must_be_empty out
'

test_expect_success 'gpurestore left nothing in TMPDIR' '
	test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'gpusend usage errors' '
	test_status 2 "$GCK_BINDIR/send/gpusend" >out 2>err &&
	test_grep "^usage: gpusend " err &&
	test_status 2 "$GCK_BINDIR/send/gpusend" -p 1 host:/tmp >out 2>err &&
	test_grep "^gpusend: a live process tree is restored there, not stored: drop .:/tmp.$" err &&
	test_status 2 "$GCK_BINDIR/send/gpusend" --resume - host:x </dev/null \
	    >out 2>err &&
	test_grep "^gpusend: --resume continues a file stored there" err &&
	test_status 2 "$GCK_BINDIR/send/gpusend" -c zstd img host >out 2>err &&
	test_grep "^gpusend: -c, --live, --max-rounds, --lock-timeout, --sign and the criu options are for a live tree" err &&
	test_status 2 "$GCK_BINDIR/send/gpusend" --parallel 17 -p 1 host \
	    >out 2>err &&
	test_grep "^gpusend: invalid --parallel .17.: too large (use 1 to 16)$" err &&
	test_status 2 "$GCK_BINDIR/send/gpusend" -o Cipher=aes -p 1 host \
	    >out 2>err &&
	test_grep "^gpusend: unsupported option .Cipher." err &&
	test_status 2 "$GCK_BINDIR/send/gpusend" -p 1 @host >out 2>err &&
	test_grep "^gpusend: invalid destination: empty user name$" err &&
	test_must_be_empty out
'

test_expect_success 'gpusend -p: a gone process is named before any connection' '
	test_status 1 "$GCK_BINDIR/send/gpusend" -P 1 -p $deadpid 127.0.0.1 \
	    >out 2>err &&
	test_must_be_empty out &&
	test_line_count err 1 &&
	test_grep "^gpusend: local: no process $deadpid$" err
'

test_expect_success 'gpurecv refuses a terminal and needs an id' '
	test_status 2 "$GCK_BINDIR/recv/gpurecv" --restore >out 2>err &&
	test_grep "^usage: gpurecv " err &&
	test_status 2 "$GCK_BINDIR/recv/gpurecv" --restore --join x \
	    >out 2>err &&
	test_grep "^usage: gpurecv " err &&
	test_status 1 "$GCK_BINDIR/recv/gpurecv" --outcome nothex </dev/null \
	    >out 2>err &&
	test_grep "^gpurecv: invalid hand-over id .nothex.$" err &&
	if test -e /dev/tty && (: </dev/tty) 2>/dev/null; then
		test_status 1 "$GCK_BINDIR/recv/gpurecv" --restore --id x \
		    </dev/tty >out 2>err &&
		test_grep "^gpurecv: standard input is a terminal" err
	fi
'

test_done
