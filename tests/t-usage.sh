#!/bin/sh
test_description='command lines, usage errors and refused input'
. "$GCK_SRCDIR/lib.sh"

# The long options of an option table, of a --help text, and of the
# option list of a manual page (the heads of its .It items).
src_longopts() {
	sed -n '/longopts\[\] = {/,/^};/s/^[[:space:]]*{ "\([^"]*\)".*/--\1/p' \
	    "$1" | sort -u
}
help_longopts() {
	grep -o -e '--[a-z][a-z-]*' "$1" | sort -u
}

# accepts BIN OPT...: BIN knows each long OPT (given an argument, then
# --help, it may refuse the argument but not the option).
accepts() {
	_bin=$1
	shift
	for _o in "$@"; do
		"$_bin" "$_o=1" --help >/dev/null 2>err.acc </dev/null
		if grep "unrecognized option\|ambiguous" err.acc >/dev/null; then
			echo >&2 "$_bin does not accept $_o:"
			cat >&2 err.acc
			return 1
		fi
	done
}

for prog in ckpt/gpuckpt restore/gpurestore send/gpusend recv/gpurecv \
    inspect/gpuinspect watch/gpuwatch; do
	name=${prog#*/}
	bin=$GCK_BINDIR/$prog
	src=$GCK_TOPSRCDIR/src/$prog.c
	page=$GCK_MANDIR/$name.1

	for opt in --help -h; do
		test_expect_success "$name $opt" "
			test_status 0 '$bin' $opt >out 2>err &&
			test_grep '^usage: $name ' out &&
			test_must_be_empty err
		"
	done

	test_expect_success "$name --help: a description, examples, the page" "
		test_status 0 '$bin' --help >out 2>err &&
		test_must_be_empty err &&
		sed -n '/^[^ ]/{/^usage: /d;p;q;}' out >desc &&
		test_grep '^[A-Z].*[a-z]' desc &&
		test_grep '^Examples:\$' out &&
		sed -n '/^Examples:\$/{n;p;}' out >ex &&
		test_grep '^  .*$name ' ex &&
		tail -n 1 out >last &&
		echo 'See $name(1).' >expect &&
		test_cmp expect last
	"

	test_expect_success "$name --help: each option on a line of its own" "
		'$bin' --help >out &&
		src_longopts '$src' >table &&
		test_grep '^--help\$' table &&
		for o in \$(cat table); do
			grep -e \"^  .*\$o\\([=[ ]\\|\$\\)\" out >/dev/null ||
			{ echo >&2 \"no line for \$o\"; return 1; }
		done
	"

	test_expect_success "$name --help: each short option on a line" "
		'$bin' --help >out &&
		sed -n 's/.*getopt_long(argc, argv, \"\\([^\"]*\\)\".*/\\1/p' \
		    '$src' | tr -d :+ | fold -w 1 >letters &&
		test -s letters &&
		for l in \$(cat letters); do
			grep -e \"^  -\$l[, ]\" out >/dev/null ||
			{ echo >&2 \"no line for -\$l\"; return 1; }
		done
	"

	test_expect_success "$name --help: within 80 columns after the usage" "
		'$bin' --help | sed '1,/^[^ u]/{/^[^ u]/!d;}' >body &&
		! grep '.\\{81\\}' body
	"

	test_expect_success "$name --help, $name.1 and $name.c: the same long options" "
		'$bin' --help >out &&
		src_longopts '$src' >table &&
		help_longopts out >help &&
		man_longopts '$page' >man &&
		test_cmp table help &&
		test_cmp table man &&
		accepts '$bin' \$(cat help)
	"

	for opt in --version -V; do
		test_expect_success "$name $opt" "
			test_status 0 '$bin' $opt >out 2>err &&
			test_must_be_empty err &&
			echo '$name (gpuckpt) 0.1.0' >expect &&
			head -n 1 out >first &&
			test_cmp expect first &&
			test_grep '^License ISC: ' out &&
			test_grep '^There is NO WARRANTY, to the extent permitted by law\.\$' out &&
			test_line_count out 4
		"
	done

	test_expect_success "$name rejects an unknown option" "
		test_status 2 '$bin' --no-such-option >out 2>err &&
		test_grep '^usage: $name ' err &&
		test_grep \"^Try '$name --help' for more information\\.\\\$\" err &&
		test_must_be_empty out
	"
done

slurm=$GCK_BINDIR/slurm/gpuckpt-slurm
test_expect_success 'gpuckpt-slurm -h, -V and no command' '
	test_status 0 "$slurm" -h >out 2>err &&
	test_must_be_empty err &&
	test_grep "^usage: gpuckpt-slurm " out &&
	test_grep "^Examples:\$" out &&
	for o in -d -k -q -h -V; do
		test_grep "^  $o " out || return 1
	done &&
	tail -n 1 out >last &&
	echo "See gpuckpt-slurm(1)." >expect &&
	test_cmp expect last &&
	test_status 0 "$slurm" -V >out 2>err &&
	test_must_be_empty err &&
	test_grep "^gpuckpt-slurm (gpuckpt) 0.1.0\$" out &&
	test_grep "^License ISC: " out &&
	test_grep "^There is NO WARRANTY" out &&
	test_status 2 "$slurm" >out 2>err &&
	test_must_be_empty out &&
	head -n 1 err >first &&
	echo "gpuckpt-slurm: no command given" >expect &&
	test_cmp expect first &&
	test_grep "^usage: gpuckpt-slurm " err
'

# refused LINE ARGS...: the command ARGS exits 2, with nothing on
# stdout, and on stderr LINE, then the synopsis, then where help is.
refused() {
	_line=$1
	shift
	_name=${1##*/}
	test_status 2 "$@" >out 2>err </dev/null &&
	test_must_be_empty out &&
	head -n 1 err >first &&
	echo "$_name: $_line" >expect &&
	test_cmp expect first &&
	sed -n 2p err >second &&
	test_grep "^usage: $_name " second &&
	tail -n 1 err >last &&
	echo "Try '$_name --help' for more information." >expect &&
	test_cmp expect last
}

# A pid that existed a moment ago and is gone now.
sh -c 'exit 0' &
deadpid=$!
wait $deadpid

test_expect_success 'gpuckpt without -p' '
	test_status 2 "$GCKPT" >out 2>err &&
	test_grep "^gpuckpt: no process given: use -p PID$" err &&
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

# Each missing operand or bad combination says which, then the usage.
B=$GCK_BINDIR
while IFS='|' read -r line args; do
	test -n "$line" || continue
	test_expect_success "refused: $args" "
		refused \"\$line\" $args
	"
done <<EOF
no process given: use -p PID|$B/ckpt/gpuckpt
no process given: use -p PID|$B/ckpt/gpuckpt -v -o x.gck
unexpected operand 'extra': gpuckpt takes none|$B/ckpt/gpuckpt -p 1 extra
--kill, --leave-running and --stop exclude each other|$B/ckpt/gpuckpt -k -s -p 1
--resume needs the tree: use -p PID|$B/restore/gpurestore --resume
--resume takes no image: drop 'x.gck'|$B/restore/gpurestore --resume -p 1 x.gck
one image at most, got 2|$B/restore/gpurestore a.gck b.gck
-p is for --resume: an image says its own processes|$B/restore/gpurestore -p 1 a.gck
nothing to send given: use -p PID host, or FILE host|$B/send/gpusend
no destination host given|$B/send/gpusend -p 1
-p takes one operand, the host: unexpected 'b'|$B/send/gpusend -p 1 a b
no destination host given after 'x.gck'|$B/send/gpusend x.gck
unexpected operand 'c': give one file and one host|$B/send/gpusend a b c
--max-rounds is for --live|$B/send/gpusend --max-rounds=2 -p 1 host
--timeout must be more than 0|$B/send/gpusend --timeout=0 -p 1 host
ConnectTimeout must be more than 0|$B/send/gpusend -o ConnectTimeout=0 -p 1 host
--timeout must be more than 0|$B/recv/gpurecv --timeout=0 --restore --id x
--id is required|$B/recv/gpurecv --restore
--id is required|$B/recv/gpurecv
--restore, --to-cache, --join and --outcome exclude each other|$B/recv/gpurecv --restore --join x
no path given: a store needs the path to store at|$B/recv/gpurecv --id x
unexpected operand 'b': a store takes one path|$B/recv/gpurecv --id x a b
unexpected operand 'a': only a store takes a path|$B/recv/gpurecv --restore --id x a
-d needs two images, got one|$B/inspect/gpuinspect -d onlyone
-d needs two images, got none|$B/inspect/gpuinspect -d
-d needs two images, got more|$B/inspect/gpuinspect -d a b c
-d, -t, -x, --check and --flatten exclude each other|$B/inspect/gpuinspect -t -d a b
one image at most, got 2|$B/inspect/gpuinspect a.gck b.gck
-j is for a summary, --check, -d, or -t of a series|$B/inspect/gpuinspect -j -t a.gck
-x needs a name|$B/inspect/gpuinspect --extract= a.gck
--parent is for --verify and --flatten|$B/inspect/gpuinspect --parent=p a.gck
EOF

test_done
