/*
 * Unit tests for the cut across hosts (core/cut.c): the gpuckpts of one
 * cut meet in a directory, each posting the phases it reaches and
 * waiting for the others'.  The other hosts are played by files written
 * here, as theirs would be.
 */

#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "private.h"
#include "core/cut.h"

struct fx {
	struct gck_ctx	*ctx;
	char		 dir[64];
};

static int
setup(void **state)
{
	struct fx	*fx;

	if ((fx = calloc(1, sizeof *fx)) == NULL ||
	    (fx->ctx = gck_ctx_new()) == NULL)
		return -1;
	snprintf(fx->dir, sizeof fx->dir, "/tmp/t_cut.XXXXXX");
	if (mkdtemp(fx->dir) == NULL)
		return -1;
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fx	*fx = *state;
	char		 cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
	if (system(cmd) != 0)
		return -1;
	gck_ctx_free(fx->ctx);
	free(fx);
	return 0;
}

/* Another host's file, as it posts it. */
static void
other(const struct fx *fx, const char *name, const char *text)
{
	char	path[256];
	FILE	*f;

	snprintf(path, sizeof path, "%s/%s", fx->dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static int64_t
soon(int ms)
{
	return gck_clock_us() + (int64_t)ms * 1000;
}

/* Every host there: the others' texts, each line after its host. */
static void
test_gather(void **state)
{
	struct fx	*fx = *state;
	struct gck_cut	*c;
	char		*t;

	assert_int_equal(gck_cut_open(fx->ctx, fx->dir, 3, "a", &c), GCK_OK);
	assert_string_equal(gck_cut_name(c), "a");
	other(fx, "b.held", "rank 7 12 0\n");
	other(fx, "c.held", "rank 9 11 1\ncomm 00000000000000aa 4 2 3\n");
	other(fx, "c.parked", "rank 9 12 0\n");
	assert_int_equal(gck_cut_post(fx->ctx, c, "held", "rank 5 10 0\n"),
	    GCK_OK);
	assert_int_equal(gck_cut_gather(fx->ctx, c, "held", soon(2000), &t),
	    GCK_OK);
	/* ours not among them; the order is the directory's */
	assert_non_null(strstr(t, "b rank 7 12 0\n"));
	assert_non_null(strstr(t, "c rank 9 11 1\n"));
	assert_non_null(strstr(t, "c comm 00000000000000aa 4 2 3\n"));
	assert_null(strstr(t, "rank 5"));
	assert_null(strstr(t, "12 0\nc rank 9 12"));
	free(t);
	gck_cut_free(c);
}

/* A host missing: the wait ends at its deadline, naming the phase. */
static void
test_timeout(void **state)
{
	struct fx	*fx = *state;
	struct gck_cut	*c;
	char		*t;
	int64_t		 t0;

	assert_int_equal(gck_cut_open(fx->ctx, fx->dir, 2, "a", &c), GCK_OK);
	assert_int_equal(gck_cut_post(fx->ctx, c, "parked", ""), GCK_OK);
	t0 = gck_clock_us();
	assert_int_equal(gck_cut_gather(fx->ctx, c, "parked", soon(300), &t),
	    GCK_ETIMEDOUT);
	assert_true(gck_clock_us() - t0 >= 300000);
	assert_null(t);
	assert_non_null(strstr(gck_error_string(fx->ctx),
	    "only 1 of the 2 hosts of the cut"));
	assert_non_null(strstr(gck_error_string(fx->ctx), "'parked'"));
	gck_cut_free(c);
}

/* A host that failed ends the wait at once, with its message. */
static void
test_failed(void **state)
{
	struct fx	*fx = *state;
	struct gck_cut	*c;
	char		*t;

	assert_int_equal(gck_cut_open(fx->ctx, fx->dir, 2, "a", &c), GCK_OK);
	other(fx, "b.failed", "process 12: GPU lock failed\n");
	assert_int_equal(gck_cut_post(fx->ctx, c, "dumped", ""), GCK_OK);
	assert_int_equal(gck_cut_gather(fx->ctx, c, "dumped", soon(5000), &t),
	    GCK_EREMOTE);
	assert_string_equal(gck_error_string(fx->ctx),
	    "b of the cut failed: process 12: GPU lock failed");
	/* and ours, posted, ends the others' */
	gck_cut_fail(c, "process 3: no room");
	gck_cut_free(c);
	assert_int_equal(gck_cut_open(fx->ctx, fx->dir, 2, "c", &c), GCK_OK);
	assert_int_equal(gck_cut_gather(fx->ctx, c, "held", soon(5000), &t),
	    GCK_EREMOTE);
	assert_non_null(strstr(gck_error_string(fx->ctx), " of the cut "
	    "failed: process "));
	gck_cut_free(c);
}

/* Names are checked; a cut is of two hosts at least. */
static void
test_bad(void **state)
{
	struct fx	*fx = *state;
	struct gck_cut	*c;

	assert_int_equal(gck_cut_open(fx->ctx, fx->dir, 2, "a/b", &c),
	    GCK_EINVAL);
	assert_null(c);
	assert_int_equal(gck_cut_open(fx->ctx, fx->dir, 2, ".a", &c),
	    GCK_EINVAL);
	assert_int_equal(gck_cut_open(fx->ctx, fx->dir, 2, "", &c),
	    GCK_EINVAL);
	assert_int_equal(gck_cut_open(fx->ctx, fx->dir, 1, "a", &c),
	    GCK_EINVAL);
	assert_string_equal(gck_error_string(fx->ctx),
	    "a cut is of 2 hosts or more");
	/* the host's own name, without its domain */
	assert_int_equal(gck_cut_open(fx->ctx, fx->dir, 2, NULL, &c), GCK_OK);
	assert_null(strchr(gck_cut_name(c), '.'));
	gck_cut_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_gather, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
