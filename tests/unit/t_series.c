/*
 * Unit tests for series.c: a series' index read and refused, its lock,
 * what a run cut short left removed, and snapshots that are not sound.
 */

#include "config.h"

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

#include "unit.h"

#define A	"000001-20261128T210000Z.gck"
#define B	"000002-20261128T211000Z.gck"
#define ID	"0123456789abcdef0123456789abcdef"

static void	 put(const struct unit *, const char *, const char *);
static int	 there(const struct unit *, const char *);

/* Writes text to the file name of u's directory. */
static void
put(const struct unit *u, const char *name, const char *text)
{
	char	 path[PATH_MAX + 64];
	FILE	*f;

	snprintf(path, sizeof path, "%s/%s", u->dir, name);
	assert_non_null(f = fopen(path, "w"));
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

static int
there(const struct unit *u, const char *name)
{
	char	path[PATH_MAX + 64];

	snprintf(path, sizeof path, "%s/%s", u->dir, name);
	return access(path, F_OK) == 0;
}

/* Two snapshots, B incremental over A, neither file there. */
static const char two[] = "{\"version\": 1, \"snapshots\": ["
    "{\"name\": \"" A "\", \"id\": \"" ID "\", \"parent\": null, "
    "\"time\": \"2026-11-28T21:00:00Z\", \"size\": 10, \"full\": true}, "
    "{\"name\": \"" B "\", \"id\": \"" ID "\", \"parent\": \"" A "\", "
    "\"time\": \"2026-11-28T21:10:00Z\", \"size\": 5, \"full\": false}]}\n";

static void
test_no_index(void **state)
{
	struct unit		*u = *state;
	struct gck_series	*s = (struct gck_series *)1;
	char			 want[PATH_MAX + 64];

	assert_int_equal(gck_series_open(u->ctx, u->dir, 0, &s), GCK_EINVAL);
	assert_null(s);
	snprintf(want, sizeof want, "'%s' is not a snapshot series: it has "
	    "no index.json", u->dir);
	assert_string_equal(gck_error_string(u->ctx), want);
	/* To write, a series begins empty. */
	assert_int_equal(gck_series_open(u->ctx, u->dir, 1, &s), GCK_OK);
	assert_int_equal(gck_series_count(s), 0);
	assert_null(gck_series_get(s, 0));
	gck_series_free(s);
}

static void
test_read(void **state)
{
	struct unit			*u = *state;
	struct gck_series		*s;
	const struct gck_snapshot	*sn;
	char				 want[PATH_MAX + 64];

	put(u, "index.json", two);
	assert_int_equal(gck_series_open(u->ctx, u->dir, 0, &s), GCK_OK);
	assert_int_equal(gck_series_count(s), 2);
	assert_non_null(sn = gck_series_get(s, 1));
	assert_string_equal(sn->name, B);
	assert_string_equal(sn->parent, A);
	snprintf(want, sizeof want, "%s/%s", u->dir, B);
	assert_string_equal(sn->path, want);
	assert_int_equal(sn->seq, 2);
	assert_int_equal(sn->size, 5);
	assert_false(sn->full);
	assert_true(gck_series_get(s, 0)->full);
	assert_null(gck_series_get(s, 0)->parent);
	gck_series_free(s);
}

static void
test_refused(void **state)
{
	static const struct {
		const char	*text;
		int		 code;
		const char	*msg;
	} bad[] = {
		{ "not json", GCK_EFORMAT, "cannot read series index" },
		{ "{\"version\": 2, \"snapshots\": []}", GCK_EVERSION,
		    "is of version 2: this gpuckpt reads version 1" },
		{ "{\"version\": 1}", GCK_EFORMAT, "corrupt series index" },
		{ "{\"version\": 1, \"snapshots\": [{\"name\": \"x.gck\"}]}",
		    GCK_EFORMAT, "bad snapshot 1" },
		/* full, yet with a parent */
		{ "{\"version\": 1, \"snapshots\": [{\"name\": \"" A "\", "
		    "\"id\": \"" ID "\", \"parent\": \"" B "\", \"time\": "
		    "\"t\", \"size\": 1, \"full\": true}]}", GCK_EFORMAT,
		    "bad snapshot 1" },
		/* a sign before the sequence number */
		{ "{\"version\": 1, \"snapshots\": [{\"name\": "
		    "\"+00001-20261128T210000Z.gck\", \"id\": \"" ID "\", "
		    "\"parent\": null, \"time\": \"t\", \"size\": 1, "
		    "\"full\": true}]}", GCK_EFORMAT, "bad snapshot 1" },
	};
	struct unit		*u = *state;
	struct gck_series	*s;
	size_t			 i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		put(u, "index.json", bad[i].text);
		assert_int_equal(gck_series_open(u->ctx, u->dir, 0, &s),
		    bad[i].code);
		assert_null(s);
		assert_non_null(strstr(gck_error_string(u->ctx), bad[i].msg));
		/* Nothing is removed on the word of a bad index. */
		put(u, A, "x");
		assert_int_equal(gck_series_open(u->ctx, u->dir, 1, &s),
		    bad[i].code);
		assert_true(there(u, A));
	}
}

static void
test_lock(void **state)
{
	struct unit		*u = *state;
	struct gck_series	*s, *s2;
	char			 want[2 * PATH_MAX + 128];

	assert_int_equal(gck_series_open(u->ctx, u->dir, 1, &s), GCK_OK);
	assert_int_equal(gck_series_open(u->ctx, u->dir, 1, &s2), GCK_EBUSY);
	assert_null(s2);
	snprintf(want, sizeof want, "series '%s' is being written by process "
	    "%ld (it holds '%s/.lock')", u->dir, (long)getpid(), u->dir);
	assert_string_equal(gck_error_string(u->ctx), want);
	/* Readers take no lock. */
	put(u, "index.json", two);
	assert_int_equal(gck_series_open(u->ctx, u->dir, 0, &s2), GCK_OK);
	gck_series_free(s2);
	gck_series_free(s);
	assert_int_equal(gck_series_open(u->ctx, u->dir, 1, &s), GCK_OK);
	gck_series_free(s);
}

static void
test_tidy(void **state)
{
	struct unit		*u = *state;
	struct gck_series	*s;

	put(u, "index.json", two);
	put(u, A, "a");
	put(u, "000003-20261128T212000Z.gck", "listed nowhere");
	put(u, "000004-20261128T213000Z.gck.tmp.abcdefABCDEF", "cut short");
	put(u, "index.json.tmp.abcdefABCDEF", "cut short");
	put(u, "notes.txt", "the user's");
	put(u, "other.gck", "the user's");
	/* To read, nothing is touched. */
	assert_int_equal(gck_series_open(u->ctx, u->dir, 0, &s), GCK_OK);
	gck_series_free(s);
	assert_true(there(u, "000003-20261128T212000Z.gck"));
	assert_int_equal(gck_series_open(u->ctx, u->dir, 1, &s), GCK_OK);
	gck_series_free(s);
	assert_true(there(u, A));
	assert_false(there(u, "000003-20261128T212000Z.gck"));
	assert_false(there(u, "000004-20261128T213000Z.gck.tmp.abcdefABCDEF"));
	assert_false(there(u, "index.json.tmp.abcdefABCDEF"));
	assert_true(there(u, "notes.txt"));
	assert_true(there(u, "other.gck"));
	assert_true(there(u, "index.json"));
}

static void
test_not_sound(void **state)
{
	struct unit		*u = *state;
	struct gck_series	*s;
	struct gck_restore_opts	 o;
	char			*text = NULL;
	pid_t			 root;
	const struct gck_snapshot *sn;

	put(u, "index.json", two);
	put(u, A, "0123456789");	/* of its size, but no image */
	assert_int_equal(gck_series_open(u->ctx, u->dir, 0, &s), GCK_OK);
	assert_int_equal(gck_series_check(u->ctx, s, 1), GCK_ESYS);
	assert_string_equal(gck_error_string(u->ctx),
	    "No such file or directory");
	put(u, B, "0123");
	assert_int_equal(gck_series_check(u->ctx, s, 1), GCK_ETRUNC);
	assert_string_equal(gck_error_string(u->ctx),
	    "image truncated: 4 bytes of the 5 the index lists");
	put(u, B, "012345");
	assert_int_equal(gck_series_check(u->ctx, s, 1), GCK_ECORRUPT);
	assert_string_equal(gck_error_string(u->ctx),
	    "image of 6 bytes, where the index lists 5");
	put(u, B, "01234");
	assert_int_equal(gck_series_check(u->ctx, s, 1), GCK_ECORRUPT);
	assert_string_equal(gck_error_string(u->ctx),
	    "image damaged: no footer at its end");
	assert_int_equal(gck_series_check(u->ctx, s, 0), GCK_ECORRUPT);
	assert_int_equal(gck_series_check(u->ctx, s, 2), GCK_EINVAL);

	assert_int_equal(gck_series_describe(u->ctx, s, 0, &text), GCK_OK);
	assert_non_null(strstr(text, "\"newest\": null"));
	assert_non_null(strstr(text, "\"damaged\": 2"));
	free(text);

	memset(&o, 0, sizeof o);
	assert_int_equal(gck_series_restore(u->ctx, s, &o, NULL, NULL, &root,
	    &sn), GCK_EINVAL);
	assert_null(sn);
	assert_non_null(strstr(gck_error_string(u->ctx),
	    "holds no snapshot that can be restored"));
	gck_series_free(s);
}

int
main(void)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_no_index, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_read, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_refused, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_lock, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_tidy, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_not_sound, unit_setup,
		    unit_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
