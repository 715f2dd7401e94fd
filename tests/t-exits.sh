#!/bin/sh
test_description='the README and the manuals give the exit statuses the programs use'
. "$GCK_SRCDIR/lib.sh"

require_criu

# exit_line FILE WORDS: the README's exit-status table's line for WORDS,
# blanks squeezed, with its continuation lines.
exit_line() {
	python3 - "$1" "$2" <<-\EOF
	import re, sys
	text = open(sys.argv[1]).read()
	table = text[text.index("Exit statuses:"):].split("\n\n")[1]
	rows, cur = [], None
	for l in table.split("\n"):
	    m = re.match(r"    (\S.*?)(?:\s{2,}(.*))?$", l)
	    if m and not l.startswith("     "):
	        cur = [m.group(1), m.group(2) or ""]
	        rows.append(cur)
	    else:
	        cur[1] += " " + l.strip()
	for k, v in rows:
	    if k == sys.argv[2]:
	        print(" ".join(v.split()))
	EOF
}


test_expect_success 'README: gpuinspect exits 1 on input that is no image, as it and the manual say' '
	echo "no image" >junk &&
	test_status 1 "$GCKINSPECT" junk >out 2>err &&
	test_status 1 "$GCKINSPECT" --verify junk >out 2>err &&
	test_status 1 "$GCKRESTORE" junk >out 2>err &&
	exit_line "$GCK_TOPSRCDIR/README" gpuinspect >line &&
	test_grep "^0 success; 1 unreadable, not an image or damaged" line &&
	exit_line "$GCK_TOPSRCDIR/README" "gpuckpt, gpurestore," >line &&
	test_grep "^0 success, 1 failure, 2 invalid command line" line &&
	sed -n "/^\.Sh EXIT STATUS/,/^\.Sh/p" "$GCK_MANDIR/gpuinspect.1" |
	    tr "\n" " " >man &&
	test_grep "1 if the input cannot be read, is not an image or is damaged" man &&
	test_grep "2 if the command line is not valid" man
'

test_expect_success 'README: gpuinspect -d exits as diff does, 2 on a damaged image' '
	start_workload d -m 4 &&
	"$GCKPT" -R -p $WPID -o a.gck &&
	"$GCKPT" -k -p $WPID -o b.gck &&
	test_status 0 "$GCKINSPECT" -d a.gck a.gck >out &&
	test_status 1 "$GCKINSPECT" -d a.gck b.gck >out &&
	head -c 4096 b.gck >cut.gck &&
	test_status 2 "$GCKINSPECT" -d a.gck cut.gck >out 2>err &&
	exit_line "$GCK_TOPSRCDIR/README" "gpuinspect -d" >line &&
	test_grep "^as diff(1): 0 same, 1 different, 2 trouble (a damaged image included)" line &&
	sed -n "/^\.Sh EXIT STATUS/,/^\.Sh/p" "$GCK_MANDIR/gpuinspect.1" |
	    tr "\n" " " >man &&
	test_grep "0 if the images are the same, 1 if they differ, and 2 on trouble, a damaged or unreadable image included" man
'

test_expect_success 'README: every program exits 2 on an invalid command line' '
	for p in ckpt/gpuckpt restore/gpurestore send/gpusend recv/gpurecv \
	    inspect/gpuinspect watch/gpuwatch; do
		test_status 2 "$GCK_BINDIR/$p" --no-such-option >out 2>err ||
		return 1
	done &&
	exit_line "$GCK_TOPSRCDIR/README" "gpuinspect" >line &&
	test_grep "2 invalid command line\$" line
'

test_done
