/*
 * Unit tests for zio.c: the compression layer under the tar layer,
 * written and read back, plain and as one zstd frame.
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
#include <zstd.h>

#include "unit.h"
#include "image/zio.h"

#define DATA_LEN	(300u << 10)	/* more than one read of input */
#define ZERO_TAIL	1000u

static char	*make_data(size_t);
static char	*slurp(int, size_t *);
static void	 zwrite(struct gck_ctx *, int, const char *, size_t, int);
static char	*zread_all(struct gck_zin *, size_t *, ssize_t *);
static void	 expect_read_fails(struct unit *, const char *, size_t, int,
		    const char *);

/* len bytes that compress, but not to nothing: text, then zeros. */
static char *
make_data(size_t len)
{
	char	*d;
	size_t	 i;

	assert_non_null(d = calloc(1, len));
	for (i = 0; i + ZERO_TAIL < len; i++)
		d[i] = "gpuckpt zio "[i % 12] + (char)(i / 4096 % 3);
	return d;
}

/* All of fd, from its start; rewinds it. */
static char *
slurp(int fd, size_t *lenp)
{
	char	*d;
	off_t	 end;

	assert_true((end = lseek(fd, 0, SEEK_END)) >= 0);
	assert_non_null(d = malloc((size_t)end + 1));
	assert_int_equal(pread(fd, d, (size_t)end, 0), end);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	*lenp = (size_t)end;
	return d;
}

static void	zwrite2(struct gck_ctx *, int, const char *, size_t, int,
		    int);

/* Writes len bytes of data through a gck_zout at level; rewinds fd. */
static void
zwrite(struct gck_ctx *ctx, int fd, const char *data, size_t len, int level)
{
	zwrite2(ctx, fd, data, len, level, 0);
}

/* As zwrite(), in frames of 140000 bytes when frames is set. */
static void
zwrite2(struct gck_ctx *ctx, int fd, const char *data, size_t len, int level,
    int frames)
{
	struct gck_zout	*z;
	size_t		 off, n;

	/* format 1's one streamed frame, or format 2's many frames */
	assert_gck_ok(ctx, gck_zout_new(ctx, fd, level, frames ? 2 : -1, &z));
	for (off = 0; off < len; off += n) {
		n = len - off < 7000 ? len - off : 7000;
		assert_gck_ok(ctx, gck_zout_write(z, data + off, n));
		if (frames && off / 7000 % 20 == 19)
			assert_gck_ok(ctx, gck_zout_frame_end(z));
	}
	assert_gck_ok(ctx, gck_zout_finish(z));
	gck_zout_free(z);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
}

/* Reads z to its end or a failure, *lastp the last read's result. */
static char *
zread_all(struct gck_zin *z, size_t *lenp, ssize_t *lastp)
{
	char	*d = NULL;
	size_t	 len = 0, cap = 0;
	ssize_t	 n;

	for (;;) {
		if (cap - len < 5000) {
			cap = cap ? cap * 2 : 65536;
			assert_non_null(d = realloc(d, cap));
		}
		if ((n = gck_zin_read(z, d + len, 5000)) <= 0)
			break;
		len += (size_t)n;
	}
	*lenp = len;
	*lastp = n;
	return d;
}

static void
round_trip(struct unit *u, int level)
{
	struct gck_zin	*z;
	char		*data, *back;
	size_t		 len;
	ssize_t		 last;
	int		 fd;

	data = make_data(DATA_LEN);
	assert_true((fd = unit_memfd(NULL, 0)) != -1);
	zwrite(u->ctx, fd, data, DATA_LEN, level);
	assert_gck_ok(u->ctx, gck_zin_new(u->ctx, fd, &z));
	assert_int_equal(gck_zin_total(z), 0);
	assert_false(gck_zin_eof(z));
	back = zread_all(z, &len, &last);
	assert_int_equal(last, 0);
	assert_int_equal(len, DATA_LEN);
	assert_memory_equal(back, data, DATA_LEN);
	assert_int_equal(gck_zin_compressed(z), level > 0);
	assert_int_equal(gck_zin_total(z), DATA_LEN);
	assert_true(gck_zin_eof(z));
	assert_int_equal(gck_zin_read(z, back, 10), 0);
	gck_zin_free(z);
	free(back);
	free(data);
	close(fd);
}

static void
test_round_trip_plain(void **state)
{
	round_trip(*state, 0);
}

static void
test_round_trip_zstd(void **state)
{
	struct unit	*u = *state;
	char		*data, *raw;
	size_t		 len;
	int		 fd;

	round_trip(u, 3);
	/* The output is one zstd frame, smaller than what it holds. */
	data = make_data(DATA_LEN);
	assert_true((fd = unit_memfd(NULL, 0)) != -1);
	zwrite(u->ctx, fd, data, DATA_LEN, 3);
	raw = slurp(fd, &len);
	assert_true(len < DATA_LEN);
	assert_memory_equal(raw, "\x28\xb5\x2f\xfd", 4);
	assert_int_equal(ZSTD_findFrameCompressedSize(raw, len), len);
	free(raw);
	free(data);
	close(fd);
}

/*
 * Format 2's output: many frames, each giving its size, decompressed by
 * workers and handed out in order; truncated anywhere, it says so.
 */
static void
test_frames(void **state)
{
	struct unit	*u = *state;
	struct gck_zin	*z;
	char		*data, *raw, *back;
	size_t		 len, blen;
	ssize_t		 last;
	int		 fd, threads;

	data = make_data(DATA_LEN);
	assert_true((fd = unit_memfd(NULL, 0)) != -1);
	zwrite2(u->ctx, fd, data, DATA_LEN, 3, 1);
	raw = slurp(fd, &len);
	assert_true(ZSTD_findFrameCompressedSize(raw, len) < len);
	assert_int_equal(ZSTD_getFrameContentSize(raw, len), 140000);
	for (threads = 1; threads <= 3; threads++) {
		assert_gck_ok(u->ctx, gck_zin_new(u->ctx, fd, &z));
		gck_zin_set_threads(z, threads);
		back = zread_all(z, &blen, &last);
		assert_int_equal(last, 0);
		assert_int_equal(blen, DATA_LEN);
		assert_memory_equal(back, data, DATA_LEN);
		assert_int_equal(gck_zin_frames(z), (DATA_LEN + 139999) /
		    140000);
		gck_zin_free(z);
		free(back);
		assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	}
	expect_read_fails(u, raw, len - 1, GCK_ETRUNC,
	    "image truncated: compressed stream ends early");
	expect_read_fails(u, raw, len / 2, GCK_ETRUNC,
	    "image truncated: compressed stream ends early");
	free(raw);
	free(data);
	close(fd);
}

/* A frame whose header says less, or more, than it holds. */
static void
test_frame_size_lies(void **state)
{
	struct unit	*u = *state;
	ZSTD_CCtx	*c;
	char		 src[5000], raw[8192];
	size_t		 len, at;

	memset(src, 'a', sizeof src);
	assert_non_null(c = ZSTD_createCCtx());
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	len = ZSTD_compress2(c, raw, sizeof raw, src, sizeof src);
	assert_false(ZSTD_isError(len));
	ZSTD_freeCCtx(c);
	/* 5000 as a 2-byte size, 5000 - 256, after the window byte if any */
	assert_int_equal(raw[4] & 0xc0, 0x40);
	at = raw[4] & 0x20 ? 5 : 6;
	raw[at] = (char)((4000 - 256) & 0xff);
	raw[at + 1] = (char)((4000 - 256) >> 8);
	expect_read_fails(u, raw, len, GCK_ECORRUPT, "corrupt image: a zstd "
	    "frame does not hold the 4000 bytes its header says");
	raw[at] = (char)((6000 - 256) & 0xff);
	raw[at + 1] = (char)((6000 - 256) >> 8);
	/* (zstd itself tells a frame that ends short) */
	expect_read_fails(u, raw, len, GCK_ECORRUPT, "corrupt image: zstd: "
	    "Data corruption detected");
}

/* A plain stream's first bytes are not taken for a zstd frame. */
static void
test_plain_short(void **state)
{
	struct unit	*u = *state;
	struct gck_zin	*z;
	char		 buf[16];
	int		 fd;

	assert_true((fd = unit_memfd("abc", 3)) != -1);
	assert_gck_ok(u->ctx, gck_zin_new(u->ctx, fd, &z));
	assert_int_equal(gck_zin_read(z, buf, sizeof buf), 3);
	assert_memory_equal(buf, "abc", 3);
	assert_false(gck_zin_compressed(z));
	assert_int_equal(gck_zin_read(z, buf, sizeof buf), 0);
	assert_true(gck_zin_eof(z));
	gck_zin_free(z);
	close(fd);
}

static void
expect_read_fails(struct unit *u, const char *in, size_t len, int code,
    const char *msg)
{
	struct gck_zin	*z;
	char		*back;
	size_t		 got;
	ssize_t		 last;
	int		 fd;

	assert_true((fd = unit_memfd(in, len)) != -1);
	assert_gck_ok(u->ctx, gck_zin_new(u->ctx, fd, &z));
	back = zread_all(z, &got, &last);
	assert_int_equal(last, -1);
	assert_int_equal(gck_error_code(u->ctx), code);
	assert_string_equal(gck_error_string(u->ctx), msg);
	gck_zin_free(z);
	free(back);
	close(fd);
}

static void
test_truncated_frame(void **state)
{
	struct unit	*u = *state;
	char		*data, *raw;
	size_t		 len;
	int		 fd;

	data = make_data(DATA_LEN);
	assert_true((fd = unit_memfd(NULL, 0)) != -1);
	zwrite(u->ctx, fd, data, DATA_LEN, 3);
	raw = slurp(fd, &len);
	expect_read_fails(u, raw, len - 1, GCK_ETRUNC,
	    "image truncated: compressed stream ends early");
	expect_read_fails(u, raw, len / 2, GCK_ETRUNC,
	    "image truncated: compressed stream ends early");
	expect_read_fails(u, raw, 6, GCK_ETRUNC,
	    "image truncated: compressed stream ends early");
	free(raw);
	free(data);
	close(fd);
}

static void
test_data_after_frame(void **state)
{
	struct unit	*u = *state;
	char		*raw;
	size_t		 len;
	int		 fd;

	assert_true((fd = unit_memfd(NULL, 0)) != -1);
	zwrite(u->ctx, fd, "hello", 5, 3);
	raw = slurp(fd, &len);
	raw[len++] = 'x';
	expect_read_fails(u, raw, len, GCK_EFORMAT, "corrupt image: data "
	    "after the end of the compressed stream");
	free(raw);
	close(fd);
}

static void
test_frame_without_checksum(void **state)
{
	struct unit	*u = *state;
	char		 raw[256];
	size_t		 len;

	len = ZSTD_compress(raw, sizeof raw, "hello, world", 12, 1);
	assert_false(ZSTD_isError(len));
	expect_read_fails(u, raw, len, GCK_ECORRUPT, "corrupt image: zstd "
	    "frame without a content checksum");
}

static void
test_zero_tail(void **state)
{
	struct unit	*u = *state;
	struct gck_zin	*z;
	char		*data, *back;
	size_t		 len;
	ssize_t		 last;
	int		 fd;

	data = make_data(DATA_LEN);
	assert_true((fd = unit_memfd(NULL, 0)) != -1);
	zwrite(u->ctx, fd, data, DATA_LEN, 3);
	assert_gck_ok(u->ctx, gck_zin_new(u->ctx, fd, &z));
	back = zread_all(z, &len, &last);
	assert_int_equal(len, DATA_LEN);
	assert_int_equal(gck_zin_zero_tail(z), ZERO_TAIL);
	assert_int_equal(gck_zin_zero_range(z, DATA_LEN - ZERO_TAIL,
	    DATA_LEN), 1);
	assert_int_equal(gck_zin_zero_range(z, DATA_LEN - ZERO_TAIL - 1,
	    DATA_LEN), 0);
	assert_int_equal(gck_zin_zero_range(z, 0, 10), 0);
	/* Not yet read, or backwards. */
	assert_int_equal(gck_zin_zero_range(z, DATA_LEN - 10,
	    DATA_LEN + 1), -1);
	assert_int_equal(gck_zin_zero_range(z, DATA_LEN, DATA_LEN - 1), -1);
	gck_zin_free(z);
	free(back);
	free(data);
	close(fd);
}

static void
test_peek(void **state)
{
	struct unit	*u = *state;
	struct gck_zin	*z;
	char		 buf[64], got[16];
	int		 fd;

	assert_true((fd = unit_memfd("0123456789abcdef", 16)) != -1);
	assert_gck_ok(u->ctx, gck_zin_new(u->ctx, fd, &z));
	assert_int_equal(gck_zin_read(z, buf, 10), 10);
	assert_int_equal(gck_zin_peek(z, 2, got, 5), 0);
	assert_memory_equal(got, "23456", 5);
	assert_int_equal(gck_zin_peek(z, 0, got, 10), 0);
	assert_memory_equal(got, "0123456789", 10);
	/* Only what was handed out. */
	assert_int_equal(gck_zin_peek(z, 8, got, 3), -1);
	assert_int_equal(gck_zin_read(z, buf, sizeof buf), 6);
	assert_int_equal(gck_zin_peek(z, 8, got, 3), 0);
	assert_memory_equal(got, "89a", 3);
	gck_zin_free(z);
	close(fd);
}

/* What a spool copies is the input as it came: the compressed bytes. */
static void
spool(struct unit *u, int level)
{
	struct gck_zin	*z;
	char		*data, *raw, *copy, buf[4096];
	size_t		 len, clen;
	ssize_t		 n;
	int		 fd, sfd;

	data = make_data(DATA_LEN);
	assert_true((fd = unit_memfd(NULL, 0)) != -1);
	assert_true((sfd = unit_memfd(NULL, 0)) != -1);
	zwrite(u->ctx, fd, data, DATA_LEN, level);
	raw = slurp(fd, &len);
	assert_gck_ok(u->ctx, gck_zin_new(u->ctx, fd, &z));
	gck_zin_keep_raw(z);
	assert_int_equal(gck_zin_read(z, buf, sizeof buf), sizeof buf);
	assert_memory_equal(buf, data, sizeof buf);
	assert_gck_ok(u->ctx, gck_zin_spool(z, sfd));
	while ((n = gck_zin_read(z, buf, sizeof buf)) > 0)
		;
	assert_int_equal(n, 0);
	assert_int_equal(gck_zin_total(z), DATA_LEN);
	copy = slurp(sfd, &clen);
	assert_int_equal(clen, len);
	assert_memory_equal(copy, raw, len);
	gck_zin_free(z);
	free(copy);
	free(raw);
	free(data);
	close(sfd);
	close(fd);
}

static void
test_spool_zstd(void **state)
{
	spool(*state, 3);
}

static void
test_spool_plain(void **state)
{
	spool(*state, 0);
}

static void
test_spool_not_kept(void **state)
{
	struct unit	*u = *state;
	struct gck_zin	*z;
	char		 buf[4];
	int		 fd;

	assert_true((fd = unit_memfd("abcdefgh", 8)) != -1);
	assert_gck_ok(u->ctx, gck_zin_new(u->ctx, fd, &z));
	assert_int_equal(gck_zin_read(z, buf, sizeof buf), 4);
	assert_gck_fails(u->ctx, gck_zin_spool(z, fd), GCK_EINVAL,
	    "cannot copy the image: its head was not kept");
	/* Kept, then let go of. */
	gck_zin_keep_raw(z);
	gck_zin_nospool(z);
	assert_gck_fails(u->ctx, gck_zin_spool(z, fd), GCK_EINVAL,
	    "cannot copy the image: its head was not kept");
	gck_zin_free(z);
	close(fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip_plain,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_round_trip_zstd,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_frames, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_frame_size_lies,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_plain_short,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_truncated_frame,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_data_after_frame,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_frame_without_checksum,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_zero_tail,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_peek,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_spool_zstd,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_spool_plain,
		    unit_setup, unit_teardown),
		cmocka_unit_test_setup_teardown(test_spool_not_kept,
		    unit_setup, unit_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
