/*
 * Unit tests for devspool.c: a GPU's memory spooled as the image's own
 * compressed chunks and read back whole, sized as the GPU's, each chunk
 * checked; a damaged one, a short or long copy, an unfinished spool.
 */

#include "config.h"

#include <sys/stat.h>

#include <errno.h>
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
#include "gpu/cuda.h"
#include "image/devspool.h"

#define SIZE	((3u << 20) + 5 * 4096u)	/* a few chunks, not whole */

/* size bytes of memory: a pattern, with runs of zero pages. */
static unsigned char *
memory(size_t size)
{
	unsigned char	*m;
	uint64_t	 x = 88172645463325252ULL;
	size_t		 i;

	assert_non_null(m = malloc(size));
	for (i = 0; i < size; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		m[i] = (i / 4096) % 5 == 2 ? 0 : (unsigned char)x;
	}
	return m;
}

/* Spools m (size bytes) to path in pieces of step bytes. */
static void
spool(const struct gck_cuda_spool *o, const char *path,
    const unsigned char *m, size_t size, size_t step)
{
	void	*h;
	size_t	 off, n;

	assert_int_equal(o->create(o->arg, path, 42, 0, size, &h), 0);
	for (off = 0; off < size; off += n) {
		n = size - off < step ? size - off : step;
		assert_int_equal(o->put(h, m + off, n), 0);
	}
	assert_int_equal(o->commit(h), 0);
	o->drop(h);
}

/* Reads path back whole, into a buffer of *sizep bytes. */
static int
unspool(const struct gck_cuda_spool *o, const char *path, unsigned char **mp,
    uint64_t *sizep)
{
	void	*h;
	ssize_t	 n;
	size_t	 got = 0;
	int	 e = 0;

	assert_int_equal(o->open(o->arg, path, sizep, &h), 0);
	assert_non_null(*mp = malloc(*sizep + 1));
	for (;;) {
		n = o->get(h, *mp + got, 100000);
		if (n < 0) {
			e = errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		assert_true(got <= *sizep);
	}
	o->drop(h);
	if (e == 0)
		assert_int_equal(got, *sizep);
	return e;
}

static void
test_round_trip(void **state)
{
	struct unit			*u = *state;
	struct gck_devspool_conf	 c = { 3, 3, 2, NULL, NULL };
	struct gck_cuda_spool		 o;
	struct stat			 st;
	unsigned char			*m = memory(SIZE), *back;
	char				 path[PATH_MAX + 16], idx[PATH_MAX + 32];
	uint64_t			 size;
	int				 level;

	for (level = 0; level <= 3; level += 3) {
		c.level = level;
		gck_devspool_ops(&c, &o);
		snprintf(path, sizeof path, "%s/42-0.mem", u->dir);
		snprintf(idx, sizeof idx, "%s.idx", path);
		spool(&o, path, m, SIZE, 3u << 20 | 123);
		assert_int_equal(stat(idx, &st), 0);
		assert_int_equal(stat(path, &st), 0);
		/* compressed: its zero pages next to nothing */
		if (level > 0)
			assert_true((uint64_t)st.st_size < SIZE);
		assert_int_equal(unspool(&o, path, &back, &size), 0);
		assert_int_equal(size, SIZE);
		assert_memory_equal(back, m, SIZE);
		free(back);
	}
	free(m);
}

static void
test_empty(void **state)
{
	struct unit			*u = *state;
	struct gck_devspool_conf	 c = { 3, 3, 1, NULL, NULL };
	struct gck_cuda_spool		 o;
	unsigned char			*back;
	char				 path[PATH_MAX + 16];
	uint64_t			 size = 1;
	void				*h;

	gck_devspool_ops(&c, &o);
	snprintf(path, sizeof path, "%s/42-1.mem", u->dir);
	assert_int_equal(o.create(o.arg, path, 42, 1, 0, &h), 0);
	assert_int_equal(o.commit(h), 0);
	o.drop(h);
	assert_int_equal(unspool(&o, path, &back, &size), 0);
	assert_int_equal(size, 0);
	free(back);
}

static void
test_damaged(void **state)
{
	struct unit			*u = *state;
	struct gck_devspool_conf	 c = { 2, 3, 2, NULL, NULL };
	struct gck_cuda_spool		 o;
	unsigned char			*m = memory(SIZE), *back;
	char				 path[PATH_MAX + 16];
	uint64_t			 size;
	FILE				*f;
	int				 level;

	for (level = 0; level <= 3; level += 3) {
		c.level = level;
		gck_devspool_ops(&c, &o);
		snprintf(path, sizeof path, "%s/42-%d.mem", u->dir, level);
		spool(&o, path, m, SIZE, 65536);
		/* a byte of the second chunk's frame, or thereabouts */
		assert_non_null(f = fopen(path, "r+"));
		assert_int_equal(fseek(f, level > 0 ? 400000 : 1300000,
		    SEEK_SET), 0);
		assert_int_equal(fputc('X', f), 'X');
		assert_int_equal(fclose(f), 0);
		assert_int_equal(unspool(&o, path, &back, &size), EBADMSG);
		free(back);
	}
	free(m);
}

static void
test_wrong_size(void **state)
{
	struct unit			*u = *state;
	struct gck_devspool_conf	 c = { 3, 3, 1, NULL, NULL };
	struct gck_cuda_spool		 o;
	struct stat			 st;
	unsigned char			*m = memory(SIZE);
	char				 path[PATH_MAX + 16], idx[PATH_MAX + 32];
	void				*h;

	gck_devspool_ops(&c, &o);
	snprintf(path, sizeof path, "%s/42-0.mem", u->dir);
	snprintf(idx, sizeof idx, "%s.idx", path);
	/* less than the GPU holds: not committed, nothing left */
	assert_int_equal(o.create(o.arg, path, 42, 0, SIZE, &h), 0);
	assert_int_equal(o.put(h, m, SIZE - 4096), 0);
	assert_int_equal(o.commit(h), EIO);
	o.drop(h);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(stat(idx, &st), -1);
	/* more */
	assert_int_equal(o.create(o.arg, path, 42, 0, SIZE - 4096, &h), 0);
	assert_int_equal(o.put(h, m, SIZE), EIO);
	o.drop(h);
	assert_int_equal(stat(path, &st), -1);
	/* no index: not a spool to read */
	assert_int_equal(o.create(o.arg, path, 42, 0, SIZE, &h), 0);
	assert_int_equal(o.put(h, m, SIZE), 0);
	assert_int_equal(o.commit(h), 0);
	o.drop(h);
	assert_int_equal(unlink(idx), 0);
	assert_int_equal(o.open(o.arg, path, &(uint64_t){ 0 }, &h), ENOENT);
	free(m);
}

/*
 * The segments a GPU's memory is cut in: 16 MiB, doubled until a GPU
 * has at most 2048; the last the rest; an empty GPU's one empty file;
 * unsegmented (0), one file.
 */
static void
test_segments(void **state)
{
	const uint64_t	mib = 1 << 20, gib = 1 << 30;
	char		name[64];

	(void)state;
	assert_int_equal(gck_cuda_segment(0), 16 * mib);
	assert_int_equal(gck_cuda_segment(64 * mib + 4096), 16 * mib);
	assert_int_equal(gck_cuda_segment(32 * gib), 16 * mib);
	assert_int_equal(gck_cuda_segment(32 * gib + 1), 32 * mib);
	assert_int_equal(gck_cuda_segment(80 * gib), 64 * mib);
	assert_true(gck_cuda_nsegs(141 * gib, gck_cuda_segment(141 * gib)) <=
	    2048);
	assert_int_equal(gck_cuda_nsegs(0, 16 * mib), 1);
	assert_int_equal(gck_cuda_seg_size(0, 16 * mib, 0), 0);
	assert_int_equal(gck_cuda_nsegs(16 * mib, 16 * mib), 1);
	assert_int_equal(gck_cuda_nsegs(16 * mib + 4096, 16 * mib), 2);
	assert_int_equal(gck_cuda_seg_size(16 * mib + 4096, 16 * mib, 0),
	    16 * mib);
	assert_int_equal(gck_cuda_seg_size(16 * mib + 4096, 16 * mib, 1),
	    4096);
	assert_int_equal(gck_cuda_seg_size(16 * mib + 4096, 16 * mib, 2), 0);
	assert_int_equal(gck_cuda_nsegs(64 * mib, 0), 1);
	assert_int_equal(gck_cuda_seg_size(64 * mib, 0, 0), 64 * mib);
	gck_cuda_seg_file(name, sizeof name, 42, 1, 16 * mib, 3);
	assert_string_equal(name, "cuda-42-1.mem.00003");
	gck_cuda_seg_file(name, sizeof name, 42, 1, 16 * mib, 123456);
	assert_string_equal(name, "cuda-42-1.mem.123456");
	gck_cuda_seg_file(name, sizeof name, 42, 1, 0, 0);
	assert_string_equal(name, "cuda-42-1.mem");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_empty, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_damaged, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_wrong_size, unit_setup,
		    unit_teardown),
		cmocka_unit_test(test_segments),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
