#!/bin/sh
test_description='the manual pages are clean mdoc'
. "$GCK_SRCDIR/lib.sh"

test -n "$MANDOC" || MANDOC=$(command -v mandoc)
test -n "$MANDOC" || test_skip_all "mandoc not found"

for page in gpuckpt.1 gpurestore.1 gpusend.1 gpurecv.1 gpuinspect.1 \
    gpuwatch.1 gpuckpt-slurm.1 gpuckpt-image.5; do
	test_expect_success "$page exists" "
		test -f '$GCK_MANDIR/$page'
	"
done

for page in "$GCK_MANDIR"/*.[15]; do
	test -f "$page" || continue
	name=${page##*/}
	test_expect_success "mandoc -Tlint -Wwarning $name" "
		'$MANDOC' -Tlint -Wwarning '$page' >lint.out 2>&1
		st=\$?
		test_must_be_empty lint.out && test \$st -eq 0
	"
done

test_done
