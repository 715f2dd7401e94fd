/*
 * Unit tests for core/mounts.c: mountinfo parsed, and each mount of a
 * container's found where our mounts hold it, from the mountinfo a runc
 * container and the host it runs on showed.
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

#include <cmocka.h>

#include "private.h"
#include "core/mounts.h"
#include "unit.h"

static const char host_info[] =
    "24 1 0:6 / /dev rw,relatime shared:2 - devtmpfs devtmpfs rw\n"
    "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "28 27 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu\n"
    "30 27 254:16 /exports /data rw,relatime - ext4 /dev/vdb rw\n"
    "31 27 254:16 /exports/deep /srv/deep rw,relatime - ext4 /dev/vdb rw\n";

static const char ct_info[] =
    "65 43 254:0 /tmp/ct/rootfs / rw,relatime - ext4 /dev/vda rw\n"
    "66 65 0:40 / /proc rw,relatime - proc proc rw\n"
    "67 65 0:41 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n"
    "73 72 0:29 /t1 /sys/fs/cgroup/cpu ro,nosuid master:9 - cgroup cgroup rw,cpu\n"
    "80 65 0:6 /nvidia0 /dev/nvidia0 rw - devtmpfs devtmpfs rw\n"
    "81 65 254:16 /exports/deep/x /mnt/my\\040data rw - ext4 /dev/vdb rw\n"
    "82 65 254:16 /exports/y /y rw - ext4 /dev/vdb rw\n"
    "83 65 254:16 /elsewhere /z rw - ext4 /dev/vdb rw\n";

static void
t_parse(void **state)
{
	struct gck_mounts	*ms;
	const struct gck_mount	*m;

	assert_int_equal(gck_mountinfo_parse(*state, ct_info, &ms), GCK_OK);
	assert_int_equal(ms->n, 8);
	m = gck_mounts_root(ms);
	assert_non_null(m);
	assert_int_equal(m->id, 65);
	assert_int_equal(m->parent, 43);
	assert_int_equal(m->major, 254);
	assert_int_equal(m->minor, 0);
	assert_string_equal(m->root, "/tmp/ct/rootfs");
	assert_string_equal(m->fstype, "ext4");
	assert_string_equal(m->source, "/dev/vda");
	m = gck_mounts_find(ms, 81);
	assert_non_null(m);
	assert_string_equal(m->at, "/mnt/my data");	/* \040 undone */
	m = gck_mounts_find(ms, 73);
	assert_string_equal(m->fstype, "cgroup");	/* after "master:9 -" */
	assert_null(gck_mounts_find(ms, 99));
	gck_mounts_free(ms);
}

static void
t_resolve(void **state)
{
	struct gck_mounts	*host, *ct;

	assert_int_equal(gck_mountinfo_parse(*state, host_info, &host), GCK_OK);
	assert_int_equal(gck_mountinfo_parse(*state, ct_info, &ct), GCK_OK);
	assert_int_equal(gck_mounts_resolve(*state, ct, host), GCK_OK);
	/* the root file system: under our / */
	assert_string_equal(gck_mounts_find(ct, 65)->host, "/tmp/ct/rootfs");
	/* made inside: no mount of ours has its file system */
	assert_null(gck_mounts_find(ct, 66)->host);
	assert_null(gck_mounts_find(ct, 67)->host);
	/* a cgroup controller: the container's own cgroup */
	assert_string_equal(gck_mounts_find(ct, 73)->host,
	    "/sys/fs/cgroup/cpu/t1");
	/* a device node bound in */
	assert_string_equal(gck_mounts_find(ct, 80)->host, "/dev/nvidia0");
	/* the longest root of ours that holds it wins */
	assert_string_equal(gck_mounts_find(ct, 81)->host, "/srv/deep/x");
	assert_string_equal(gck_mounts_find(ct, 82)->host, "/data/y");
	/* its file system is ours, but no mount of ours reaches there */
	assert_null(gck_mounts_find(ct, 83)->host);
	gck_mounts_free(ct);
	gck_mounts_free(host);
}

static void
t_bad(void **state)
{
	static const char *bad[] = {
		"65 43 254:0 /r\n",				/* cut */
		"65 43 254:0 /r / rw - ext4\n",			/* no source */
		"65 43 254 /r / rw - ext4 /dev/vda rw\n",	/* maj:min */
		"x 43 254:0 /r / rw - ext4 /dev/vda rw\n",
		"65 43 254:0 r / rw - ext4 /dev/vda rw\n",	/* relative */
		"65 43 254:0 /r\\0 / rw - ext4 /dev/vda rw\n",	/* escape */
		"65 43 254:0 /r\\000 / rw - ext4 /dev/vda rw\n",	/* NUL */
		"65 43 254:0 /r / rw shared:1 ext4 /dev/vda rw\n", /* no - */
	};
	struct gck_mounts	*ms;
	size_t			 i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ms = (void *)1;
		assert_int_equal(gck_mountinfo_parse(*state, bad[i], &ms),
		    GCK_EINVAL);
		assert_null(ms);
	}
}

static void
t_self(void **state)
{
	struct gck_mounts	*ms;

	assert_int_equal(gck_mountinfo_read(*state, 0, &ms), GCK_OK);
	assert_true(ms->n > 0);
	assert_non_null(gck_mounts_root(ms));
	assert_int_equal(gck_mounts_resolve(*state, ms, ms), GCK_OK);
	/* every mount of ours is where it is */
	assert_non_null(gck_mounts_root(ms)->host);
	gck_mounts_free(ms);
}

int
main(void)
{
	static const struct CMUnitTest tests[] = {
		unit_ctx_test(t_parse),
		unit_ctx_test(t_resolve),
		unit_ctx_test(t_bad),
		unit_ctx_test(t_self),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
