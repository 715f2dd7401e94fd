/*
 * unit.h: what the cmocka unit tests share.  Include it after cmocka.h.
 *
 *	static const struct CMUnitTest tests[] = {
 *		unit_dir_test(t_x),
 *	};
 *
 * unit_setup() gives each test a struct unit (in *state): a library
 * context and a scratch directory, removed with all it holds by
 * unit_teardown().  A test with a fixture of its own puts a struct unit
 * in it and calls unit_init() and unit_release(); one that needs only a
 * context takes unit_ctx_setup() and unit_ctx_teardown().
 */
#ifndef GCK_TESTS_UNIT_H
#define GCK_TESTS_UNIT_H

#include <sys/mman.h>
#include <sys/stat.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuckpt.h"

struct unit {
	struct gck_ctx	*ctx;
	char		 dir[PATH_MAX];		/* the scratch directory */
};

static int
unit_rm_cb(const char *path, const struct stat *st, int flag,
    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Removes path and all below it; a missing one is fine. */
static inline void
unit_rmtree(const char *path)
{
	(void)nftw(path, unit_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * Makes u's context and scratch directory, for a fixture of a test's
 * own that holds a struct unit.  Returns 0, or -1 with nothing made.
 */
static inline int
unit_init(struct unit *u)
{
	const char	*tmp = getenv("TMPDIR");

	snprintf(u->dir, sizeof u->dir, "%s/unit.XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	if ((u->ctx = gck_ctx_new()) == NULL || mkdtemp(u->dir) == NULL) {
		gck_ctx_free(u->ctx);
		u->ctx = NULL;
		return -1;
	}
	return 0;
}

/* Frees u's context and removes its scratch directory. */
static inline void
unit_release(struct unit *u)
{
	unit_rmtree(u->dir);
	gck_ctx_free(u->ctx);
	u->ctx = NULL;
}

static inline int
unit_setup(void **state)
{
	struct unit	*u;

	if ((u = calloc(1, sizeof *u)) == NULL)
		return -1;
	if (unit_init(u) == -1) {
		free(u);
		return -1;
	}
	*state = u;
	return 0;
}

static inline int
unit_teardown(void **state)
{
	struct unit	*u = *state;

	if (u == NULL)
		return 0;
	unit_release(u);
	free(u);
	return 0;
}

/* For the tests that need a context only: *state is the context. */
static inline int
unit_ctx_setup(void **state)
{
	*state = gck_ctx_new();
	return *state == NULL ? -1 : 0;
}

static inline int
unit_ctx_teardown(void **state)
{
	gck_ctx_free(*state);
	return 0;
}

/* A test with a fresh context of its own, and one with a struct unit. */
#define unit_ctx_test(f)						\
	cmocka_unit_test_setup_teardown(f, unit_ctx_setup, unit_ctx_teardown)
#define unit_dir_test(f)						\
	cmocka_unit_test_setup_teardown(f, unit_setup, unit_teardown)

/* A path in the scratch directory (one static buffer a call). */
static inline const char *
unit_path(const struct unit *u, const char *name)
{
	static char	buf[4][PATH_MAX];
	static int	i;

	i = (i + 1) % 4;
	if ((size_t)snprintf(buf[i], sizeof buf[i], "%s/%s", u->dir, name) >=
	    sizeof buf[i])
		fail_msg("path too long: %s/%s", u->dir, name);
	return buf[i];
}

/* A memory file holding len bytes of data, its offset at 0. */
static inline int
unit_memfd(const void *data, size_t len)
{
	int	fd;

	if ((fd = memfd_create("unit", MFD_CLOEXEC)) == -1)
		return -1;
	if (len > 0 && write(fd, data, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	(void)lseek(fd, 0, SEEK_SET);
	return fd;
}

/* unit_memfd(), the test failing where it fails. */
static inline int
unit_memfd_ok(const void *data, size_t len)
{
	int	fd;

	if ((fd = unit_memfd(data, len)) == -1)
		fail_msg("cannot make a memory file of %zu bytes", len);
	return fd;
}

/* The call returned GCK_OK; else fails with the context's message. */
#define assert_gck_ok(ctx, call) do {					\
	int	r_ = (call);						\
	if (r_ != GCK_OK)						\
		fail_msg("%s: code %d: %s", #call, r_,			\
		    gck_error_string(ctx) != NULL ?			\
		    gck_error_string(ctx) : "(no message)");		\
} while (0)

/* The call failed with code, and its message is exactly msg. */
#define assert_gck_fails(ctx, call, code, msg) do {			\
	int	r_ = (call);						\
	assert_int_equal(r_, (code));					\
	assert_non_null(gck_error_string(ctx));				\
	assert_string_equal(gck_error_string(ctx), (msg));		\
} while (0)

#endif /* GCK_TESTS_UNIT_H */
