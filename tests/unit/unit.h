/*
 * unit.h: what the cmocka unit tests share.  Include it after cmocka.h.
 *
 *	static const struct CMUnitTest tests[] = {
 *		cmocka_unit_test_setup_teardown(t_x, unit_setup, unit_teardown),
 *	};
 *
 * unit_setup() gives each test a struct unit (in *state): a library
 * context and a scratch directory, removed with all it holds by
 * unit_teardown().
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

static inline int
unit_setup(void **state)
{
	struct unit	*u;
	const char	*tmp = getenv("TMPDIR");

	if ((u = calloc(1, sizeof *u)) == NULL)
		return -1;
	snprintf(u->dir, sizeof u->dir, "%s/unit.XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	if ((u->ctx = gck_ctx_new()) == NULL || mkdtemp(u->dir) == NULL) {
		gck_ctx_free(u->ctx);
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
	unit_rmtree(u->dir);
	gck_ctx_free(u->ctx);
	free(u);
	return 0;
}

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
