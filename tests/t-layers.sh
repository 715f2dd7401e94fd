#!/bin/sh
test_description='the library keeps its layers (src/lib/README)'
. "$GCK_SRCDIR/lib.sh"

LAYERS=$GCK_SRCDIR/layers.py
LIB=$GCK_TOPSRCDIR/src/lib

# A copy of the library's sources, to break on purpose.
copy_lib() {
	rm -rf src &&
	mkdir -p src/lib src/ckpt &&
	cp "$LIB/README" "$LIB"/*.h src/lib/ &&
	for d in $(sed -n 's/^Layers, lowest first://p' "$LIB/README"); do
		mkdir src/lib/$d &&
		cp "$LIB/$d"/*.[ch] src/lib/$d/ || return 1
	done &&
	cp "$GCK_TOPSRCDIR/src/ckpt/gpuckpt.c" src/ckpt/
}

test_expect_success 'src/lib keeps its layers' '
	python3 "$LAYERS" "$LIB" >out 2>&1 ||
	{ cat out >&2; false; } &&
	test_must_be_empty out
'

test_expect_success 'a copy of it does too' '
	copy_lib &&
	python3 "$LAYERS" src/lib >out 2>&1 &&
	test_must_be_empty out
'

test_expect_success 'a lower layer that includes a higher one fails' '
	copy_lib &&
	sed -i "s|^#include \"private.h\"|&\n#include \"ops/ops.h\"|" \
	    src/lib/core/util.c &&
	test_status 1 python3 "$LAYERS" src/lib >out 2>&1 &&
	test_grep "^layers.py: core/util.c: includes ops/ops.h, of the higher layer ops/\$" out &&
	test_line_count out 1
'

test_expect_success 'a peer private header fails' '
	copy_lib &&
	echo "int x;" >src/lib/criu/criu_private.h &&
	sed -i "s|^#include \"private.h\"|&\n#include \"criu/criu_private.h\"|" \
	    src/lib/ops/restore.c &&
	test_status 1 python3 "$LAYERS" src/lib >out 2>&1 &&
	test_grep "^layers.py: ops/restore.c: includes criu/criu_private.h, private to criu/\$" out &&
	test_line_count out 1
'

test_expect_success 'a cycle between the modules of a folder fails' '
	copy_lib &&
	sed -i "s|^#include \"private.h\"|&\n#include \"criu/streamer.h\"|" \
	    src/lib/criu/criu.c &&
	test_status 1 python3 "$LAYERS" src/lib >out 2>&1 &&
	test_grep "^layers.py: criu/: a cycle: criu -> streamer -> criu\$" out
'

test_expect_success 'a command that includes the library'"'"'s own headers fails' '
	copy_lib &&
	sed -i "s|^#include \"gpuckpt.h\"|&\n#include \"private.h\"|" \
	    src/ckpt/gpuckpt.c &&
	test_status 1 python3 "$LAYERS" src/lib >out 2>&1 &&
	test_grep "^layers.py: ckpt/gpuckpt.c: includes private.h, the library" out
'

test_expect_success 'a folder that is no layer fails' '
	copy_lib &&
	mkdir src/lib/misc &&
	test_status 1 python3 "$LAYERS" src/lib >out 2>&1 &&
	test_grep "^layers.py: misc/: a folder that is no layer\$" out
'

test_done
