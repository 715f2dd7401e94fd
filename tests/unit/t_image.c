/*
 * Unit tests for the image module: the writer, the reader, and what the
 * reader refuses.  Images live in memory files; hostile archives are
 * built by hand with libarchive, carrying valid digests where the test
 * is about something else.
 */

#include "config.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <xxhash.h>
#include <zstd.h>

#include "gpuckpt.h"
#include "image/chunker.h"
#include "image/digest.h"
#include "image/image.h"
#include "unit.h"

#define PART		4096		/* small parts keep the tests fast */
#define RECORD		10240		/* tar blocking of the writer */
#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* A CRIU file of the test image: size bytes made from seed. */
struct tfile {
	const char	*name;
	size_t		 size;
	unsigned	 seed;
};

/* What a hand-built entry is. */
enum hkind {
	HK_REG,			/* regular file, right digest */
	HK_NODIGEST,		/* regular file, no digest */
	HK_BADDIGEST,		/* regular file, wrong digest */
	HK_DIR,
	HK_SYMLINK,
	HK_HARDLINK,
	HK_CHR,
	HK_FIFO
};

/* A hand-built archive on a memory file, and its would-be trailer. */
struct hb {
	struct archive	*a;
	int		 fd;
	FILE		*sums;
	char		*sbuf;
	size_t		 slen;
	uint64_t	 count, bytes;
};

/* Per-test state: a context and a scratch directory. */
struct fixture {
	struct unit	 u;		/* the context and scratch directory */
	char		 dir[PATH_MAX + 2]; /* u.dir/x: images extracted */
	int		 dirfd;
};

static int	setup(void **);
static int	teardown(void **);
static void	check_gck(struct gck_ctx *, int, int, const char *, int);
static char	*slurp(int, size_t *);
static void	fill(char *, size_t, unsigned);
static char	*file_data(const struct tfile *);
static int	make_image(struct gck_ctx *, int, size_t, const char *,
		    const struct tfile *, size_t);
static int	read_image(struct gck_ctx *, int, int,
		    struct gck_image_stats *);
static int	read_buf(struct gck_ctx *, const char *, size_t, int);
static char	*zstd_frame(const void *, size_t, size_t *);
static void	check_files(int, const struct tfile *, size_t);
static size_t	count_dir(const char *);
static size_t	eoa_offset(const char *, size_t);
static void	hex64(uint64_t, char [17]);
static void	hb_start(struct hb *);
static void	hb_add(struct hb *, const char *, enum hkind, const void *,
		    size_t);
static void	hb_add_str(struct hb *, const char *, const char *);
static void	hb_trailer(struct hb *);
static int	hb_finish(struct hb *);
static void	hb_image_start(struct hb *);
static void	roundtrip(struct fixture *, int);
static void	test_roundtrip_plain(void **);
static void	test_roundtrip_zstd(void **);
static void	test_stats(void **);
static void	test_layout(void **);
static void	test_layout_zstd(void **);
static void	test_verify_only(void **);
static void	test_default_part_size(void **);
static void	test_part_size_too_large(void **);
static void	test_bad_file_names(void **);
static void	test_no_files(void **);
static void	test_pipe_input(void **);
static void	test_extract_existing(void **);
static void	test_empty_input(void **);
static void	test_garbage(void **);
static void	test_cut_head(void **);
static void	test_first_not_manifest(void **);
static void	test_newer_image(void **);
static void	test_truncated_plain(void **);
static void	test_truncated_eoa(void **);
static void	test_truncated_zstd(void **);
static void	test_flipped_zstd(void **);
static void	test_flipped_data(void **);
static void	test_flipped_manifest(void **);
static void	test_flipped_digest(void **);
static void	test_flipped_trailer(void **);
static void	test_flipped_header(void **);
static void	test_handbuilt_ok(void **);
static void	test_missing_trailer(void **);
static void	test_writer_unfinished(void **);
static void	test_unsafe_entries(void **);
static void	test_unsafe_name_printed(void **);
static void	test_unsafe_absolute(void **);
static void	test_entry_after_trailer(void **);
static void	test_duplicate_file(void **);
static void	test_parts_out_of_order(void **);
static void	test_second_manifest(void **);
static void	test_digest_missing(void **);
static void	test_digest_wrong(void **);
static void	test_trailer_mismatch(void **);
static void	test_oversized_entry(void **);
static void	test_data_after_end(void **);
static void	test_free_null(void **);
static void	test_memo(void **);
static void	test_chunker(void **);

#define assert_gck(ctx, r, code, sub)					\
	check_gck((ctx), (r), (code), (sub), __LINE__)

static const char manifest[] =
    "{\n"
    "  \"format\": 1,\n"
    "  \"tool\": \"gpuckpt 0.1.0\",\n"
    "  \"created\": \"2025-01-02T03:04:05Z\",\n"
    "  \"root_pid\": 4242,\n"
    "  \"shell_job\": true,\n"
    "  \"processes\": [\n"
    "    {\"pid\": 4242, \"comm\": \"sleeper\"},\n"
    "    {\"pid\": 4243, \"comm\": \"worker\"}\n"
    "  ],\n"
    "  \"part_size\": 4096\n"
    "}\n";

/* Sizes around the part size: empty, exact, one over, several parts. */
static const struct tfile files[] = {
	{ "inventory.img", 300, 1 },
	{ "core-4242.img", 0, 2 },
	{ "mm-4242.img", PART, 3 },
	{ "pagemap-4242.img", PART + 1, 4 },
	{ "pages-1.img", 5 * PART + 123, 5 },
};

/* The entries of the image of files[], in order. */
static const char *const layout[] = {
	"gpuckpt.json",
	"criu/inventory.img",
	"criu/core-4242.img",
	"criu/mm-4242.img",
	"criu/pagemap-4242.img.part00000",
	"criu/pagemap-4242.img.part00001",
	"criu/pages-1.img.part00000",
	"criu/pages-1.img.part00001",
	"criu/pages-1.img.part00002",
	"criu/pages-1.img.part00003",
	"criu/pages-1.img.part00004",
	"criu/pages-1.img.part00005",
	"gpuckpt.sums",
};

/* A file whose data a test can find in the image and damage. */
static const char marker[] = "<<marker: part two of pages-1>>";

static int
setup(void **state)
{
	struct fixture	*f;

	if ((f = calloc(1, sizeof *f)) == NULL)
		return -1;
	if (unit_init(&f->u) == -1) {
		free(f);
		return -1;
	}
	snprintf(f->dir, sizeof f->dir, "%s/x", f->u.dir);
	if (mkdir(f->dir, 0700) == -1 ||
	    (f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) ==
	    -1) {
		unit_release(&f->u);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture	*f = *state;

	close(f->dirfd);
	unit_release(&f->u);
	free(f);
	return 0;
}

/* Checks a result: its code, the context's code, a part of the message. */
static void
check_gck(struct gck_ctx *ctx, int r, int code, const char *sub, int line)
{
	const char	*e = gck_error_string(ctx);

	if (r != code)
		fail_msg("line %d: got %d (%s), want %d", line, r,
		    e != NULL ? e : "no message", code);
	if (code == GCK_OK)
		return;
	if (gck_error_code(ctx) != code)
		fail_msg("line %d: gck_error_code() is %d, want %d", line,
		    gck_error_code(ctx), code);
	if (e == NULL || strstr(e, sub) == NULL)
		fail_msg("line %d: message '%s' lacks '%s'", line,
		    e != NULL ? e : "(null)", sub);
	if (strchr(e, '\n') != NULL)
		fail_msg("line %d: message '%s' is not one line", line, e);
}

/* Returns the whole content of the file on fd (free it). */
static char *
slurp(int fd, size_t *lenp)
{
	struct stat	 st;
	char		*buf;
	ssize_t		 n;
	size_t		 got = 0;

	assert_int_equal(fstat(fd, &st), 0);
	assert_non_null(buf = malloc((size_t)st.st_size + 1));
	while (got < (size_t)st.st_size) {
		n = pread(fd, buf + got, (size_t)st.st_size - got,
		    (off_t)got);
		assert_true(n > 0);
		got += (size_t)n;
	}
	*lenp = got;
	return buf;
}

/* Fills buf: text for odd seeds (compressible), noise for even ones. */
static void
fill(char *buf, size_t len, unsigned seed)
{
	uint32_t	x = seed * 2654435761u + 1;
	size_t		i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		if (seed % 2 == 1)
			buf[i] = "abcdefgh\n"[(i / 7 + x % 2) % 9];
		else
			buf[i] = (char)(x >> 24);
	}
}

static char *
file_data(const struct tfile *t)
{
	char	*buf;

	assert_non_null(buf = malloc(t->size + 1));
	fill(buf, t->size, t->seed);
	if (strcmp(t->name, "pages-1.img") == 0)
		memcpy(buf + 2 * PART + 100, marker, sizeof marker - 1);
	return buf;
}

/*
 * Writes an image of manifest text m and the files t[] with the library.
 * Returns a memory file holding it, at offset 0.
 */
static int
make_image(struct gck_ctx *ctx, int level, size_t part, const char *m,
    const struct tfile *t, size_t n)
{
	struct gck_writer	*w;
	char			*data;
	size_t			 i;
	int			 fd, dfd;

	fd = unit_memfd_ok(NULL, 0);
	assert_int_not_equal(fd, -1);
	assert_gck(ctx, gck_writer_new2(ctx, fd, level, part, 1, 0, &w), GCK_OK,
	    NULL);
	assert_non_null(w);
	assert_gck(ctx, gck_writer_add(w, "gpuckpt.json", m, strlen(m)),
	    GCK_OK, NULL);
	for (i = 0; i < n; i++) {
		data = file_data(&t[i]);
		dfd = unit_memfd_ok(data, t[i].size);
		free(data);
		assert_gck(ctx, gck_writer_add_file(w, t[i].name, dfd),
		    GCK_OK, NULL);
		close(dfd);
	}
	assert_gck(ctx, gck_writer_finish(w), GCK_OK, NULL);
	gck_writer_free(w);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/*
 * Reads the image on fd (from its start) to the end, extracting under
 * dirfd (-1: verify only).  Returns the first failure or GCK_OK.
 */
static int
read_image(struct gck_ctx *ctx, int fd, int dirfd,
    struct gck_image_stats *st)
{
	struct gck_reader		*r = NULL;
	const struct gck_manifest	*m;
	int				 ret;

	if (lseek(fd, 0, SEEK_SET) == -1)
		assert_int_equal(errno, ESPIPE);
	if ((ret = gck_reader_new(ctx, fd, &r)) == GCK_OK &&
	    (ret = gck_reader_head(r, &m)) == GCK_OK) {
		assert_non_null(m);
		ret = gck_reader_extract(r, dirfd);
	}
	if (st != NULL && r != NULL)
		gck_reader_stats(r, st);
	gck_reader_free(r);
	return ret;
}

/* Reads an image held in memory, verify only. */
static int
read_buf(struct gck_ctx *ctx, const char *buf, size_t len, int dirfd)
{
	int	fd, ret;

	fd = unit_memfd_ok(buf, len);
	ret = read_image(ctx, fd, dirfd, NULL);
	close(fd);
	return ret;
}

/*
 * len bytes of buf as one zstd frame with a content checksum, as zstd(1)
 * writes it; *zlenp gets its length.
 */
static char *
zstd_frame(const void *buf, size_t len, size_t *zlenp)
{
	ZSTD_CCtx	*cc;
	char		*z;
	size_t		 zlen = ZSTD_compressBound(len);

	assert_non_null(z = malloc(zlen));
	assert_non_null(cc = ZSTD_createCCtx());
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc,
	    ZSTD_c_checksumFlag, 1)));
	*zlenp = ZSTD_compress2(cc, z, zlen, buf, len);
	assert_false(ZSTD_isError(*zlenp));
	ZSTD_freeCCtx(cc);
	return z;
}

/* The files t[] are under dirfd, byte for byte, and nothing else. */
static void
check_files(int dirfd, const struct tfile *t, size_t n)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		*want, *got;
	size_t		 i, len, count = 0;
	int		 fd;

	for (i = 0; i < n; i++) {
		fd = openat(dirfd, t[i].name, O_RDONLY | O_CLOEXEC);
		if (fd == -1)
			fail_msg("'%s' was not extracted: %s", t[i].name,
			    strerror(errno));
		assert_int_equal(fstat(fd, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0600);
		got = slurp(fd, &len);
		close(fd);
		want = file_data(&t[i]);
		if (len != t[i].size)
			fail_msg("'%s' is %zu bytes, want %zu", t[i].name,
			    len, t[i].size);
		if (len > 0 && memcmp(got, want, len) != 0)
			fail_msg("'%s' differs", t[i].name);
		free(got);
		free(want);
	}
	/* A description of its own: readdir() moves its offset. */
	assert_non_null(d = fdopendir(openat(dirfd, ".", O_RDONLY |
	    O_DIRECTORY | O_CLOEXEC)));
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			count++;
	closedir(d);
	assert_int_equal(count, n);
}

/* Counts the entries of a directory, "." and ".." left out. */
static size_t
count_dir(const char *path)
{
	struct dirent	*de;
	DIR		*d;
	size_t		 n = 0;

	assert_non_null(d = opendir(path));
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static void
hex64(uint64_t v, char hex[17])
{
	snprintf(hex, 17, "%016" PRIx64, v);
}

/* Starts a hand-built pax archive, written the way the library does. */
static void
hb_start(struct hb *h)
{
	memset(h, 0, sizeof *h);
	h->fd = unit_memfd_ok(NULL, 0);
	assert_int_not_equal(h->fd, -1);
	assert_non_null(h->sums = open_memstream(&h->sbuf, &h->slen));
	assert_non_null(h->a = archive_write_new());
	assert_int_equal(archive_write_set_format_pax(h->a), ARCHIVE_OK);
	assert_int_equal(archive_write_set_format_option(h->a, "pax",
	    "xattrheader", "SCHILY"), ARCHIVE_OK);
	assert_int_equal(archive_write_set_bytes_per_block(h->a, RECORD),
	    ARCHIVE_OK);
	/* Padded like a stream, although the output is a regular file. */
	assert_int_equal(archive_write_set_bytes_in_last_block(h->a, RECORD),
	    ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(h->a, h->fd), ARCHIVE_OK);
}

/* A hand-built image that starts as a real one: the manifest. */
static void
hb_image_start(struct hb *h)
{
	hb_start(h);
	hb_add_str(h, "gpuckpt.json", manifest);
}

/*
 * Adds an entry.  Regular files other than the trailer are listed for
 * hb_trailer().
 */
static void
hb_add(struct hb *h, const char *name, enum hkind kind, const void *data,
    size_t len)
{
	struct archive_entry	*e;
	char			 hex[17];
	uint64_t		 d;

	d = XXH3_64bits(data, len);
	if (kind == HK_BADDIGEST)
		d ^= 1;
	hex64(d, hex);
	assert_non_null(e = archive_entry_new());
	archive_entry_set_pathname(e, name);
	archive_entry_set_perm(e, 0600);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_uname(e, "root");
	archive_entry_set_gname(e, "root");
	archive_entry_set_mtime(e, 1700000000, 0);
	archive_entry_set_size(e, 0);
	switch (kind) {
	case HK_REG:
	case HK_NODIGEST:
	case HK_BADDIGEST:
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_size(e, (la_int64_t)len);
		break;
	case HK_DIR:
		archive_entry_set_filetype(e, AE_IFDIR);
		archive_entry_set_perm(e, 0700);
		break;
	case HK_SYMLINK:
		archive_entry_set_filetype(e, AE_IFLNK);
		archive_entry_set_symlink(e, "/etc/passwd");
		break;
	case HK_HARDLINK:
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_hardlink(e, "gpuckpt.json");
		break;
	case HK_CHR:
		archive_entry_set_filetype(e, AE_IFCHR);
		archive_entry_set_rdevmajor(e, 1);
		archive_entry_set_rdevminor(e, 3);
		break;
	case HK_FIFO:
		archive_entry_set_filetype(e, AE_IFIFO);
		break;
	}
	if (kind != HK_NODIGEST)
		archive_entry_xattr_add_entry(e, "gpuckpt.xxh3", hex, 16);
	assert_int_equal(archive_write_header(h->a, e), ARCHIVE_OK);
	if (archive_entry_size(e) > 0)
		assert_int_equal(archive_write_data(h->a, data, len),
		    (la_ssize_t)len);
	if (strcmp(name, "gpuckpt.sums") != 0) {
		fprintf(h->sums, "%s{\"name\":\"%s\",\"size\":%" PRId64
		    ",\"xxh3\":\"%s\"}", h->count > 0 ? "," : "", name,
		    (int64_t)archive_entry_size(e), hex);
		h->count++;
		h->bytes += (uint64_t)archive_entry_size(e);
	}
	archive_entry_free(e);
}

static void
hb_add_str(struct hb *h, const char *name, const char *s)
{
	hb_add(h, name, HK_REG, s, strlen(s));
}

/* Adds the trailer that lists every entry so far. */
static void
hb_trailer(struct hb *h)
{
	char	*text;

	assert_int_equal(fflush(h->sums), 0);
	assert_true(asprintf(&text, "{\"format\":1,\"entries\":[%s],"
	    "\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", h->sbuf,
	    h->count, h->bytes) > 0);
	hb_add_str(h, "gpuckpt.sums", text);
	free(text);
}

/* Ends the archive.  Returns its memory file, at offset 0. */
static int
hb_finish(struct hb *h)
{
	assert_int_equal(archive_write_close(h->a), ARCHIVE_OK);
	archive_write_free(h->a);
	fclose(h->sums);
	free(h->sbuf);
	assert_int_equal(lseek(h->fd, 0, SEEK_SET), 0);
	return h->fd;
}

/*
 * Writes the test image at level, reads it back into the scratch
 * directory and checks the manifest, the files and the stats.
 */
static void
roundtrip(struct fixture *f, int level)
{
	struct gck_reader		*r;
	const struct gck_manifest	*m;
	struct gck_image_stats		 st;
	const char			*text;
	size_t				 len, i;
	uint64_t			 bytes;
	int				 fd;

	fd = make_image(f->u.ctx, level, PART, manifest, files, NELEM(files));
	assert_gck(f->u.ctx, gck_reader_new(f->u.ctx, fd, &r), GCK_OK, NULL);
	assert_non_null(r);
	assert_gck(f->u.ctx, gck_reader_head(r, &m), GCK_OK, NULL);
	assert_non_null(m);
	assert_int_equal(gck_manifest_format(m), 1);
	assert_int_equal(gck_manifest_root_pid(m), 4242);
	assert_int_equal(gck_manifest_shell_job(m), 1);
	assert_int_equal(gck_manifest_nprocs(m), 2);
	assert_int_equal(gck_manifest_pid(m, 1), 4243);
	assert_string_equal(gck_manifest_comm(m, 0), "sleeper");
	assert_string_equal(gck_manifest_comm(m, 1), "worker");
	gck_reader_manifest_text(r, &text, &len);
	assert_int_equal(len, strlen(manifest));
	assert_memory_equal(text, manifest, len);

	/* The head alone: nothing extracted yet. */
	assert_int_equal(count_dir(f->dir), 0);
	assert_gck(f->u.ctx, gck_reader_extract(r, f->dirfd), GCK_OK, NULL);
	check_files(f->dirfd, files, NELEM(files));

	/* The manifest and its text outlive the extraction. */
	assert_int_equal(gck_manifest_root_pid(m), 4242);
	gck_reader_manifest_text(r, &text, &len);
	assert_memory_equal(text, manifest, len);

	gck_reader_stats(r, &st);
	assert_int_equal(st.entries, NELEM(layout));
	bytes = strlen(manifest);
	for (i = 0; i < NELEM(files); i++)
		bytes += files[i].size;
	assert_int_equal(st.bytes, bytes);
	assert_int_equal(st.compressed, level > 0);
	assert_int_equal(st.stream_bytes % RECORD, 0);
	gck_reader_free(r);
	close(fd);
}

static void
test_roundtrip_plain(void **state)
{
	roundtrip(*state, 0);
}

static void
test_roundtrip_zstd(void **state)
{
	roundtrip(*state, 3);
}

/* stream_bytes counts the tar stream, whatever its compression. */
static void
test_stats(void **state)
{
	struct fixture		*f = *state;
	struct gck_image_stats	 plain, zstd;
	size_t			 plen, zlen;
	char			*p, *z;
	int			 pfd, zfd;

	pfd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	zfd = make_image(f->u.ctx, 3, PART, manifest, files, NELEM(files));
	p = slurp(pfd, &plen);
	z = slurp(zfd, &zlen);
	assert_int_equal(plen % RECORD, 0);
	assert_memory_equal(z, "\x28\xb5\x2f\xfd", 4);
	assert_true(zlen < plen);
	assert_gck(f->u.ctx, read_image(f->u.ctx, pfd, -1, &plain), GCK_OK,
	    NULL);
	assert_gck(f->u.ctx, read_image(f->u.ctx, zfd, -1, &zstd), GCK_OK,
	    NULL);
	assert_int_equal(plain.stream_bytes, plen);
	assert_int_equal(zstd.stream_bytes, plen);
	assert_int_equal(plain.compressed, 0);
	assert_int_equal(zstd.compressed, 1);
	assert_int_equal(plain.entries, zstd.entries);
	assert_int_equal(plain.bytes, zstd.bytes);

	/* Only the manifest: manifest and trailer. */
	close(pfd);
	pfd = make_image(f->u.ctx, 0, PART, manifest, NULL, 0);
	assert_gck(f->u.ctx, read_image(f->u.ctx, pfd, -1, &plain), GCK_OK,
	    NULL);
	assert_int_equal(plain.entries, 2);
	assert_int_equal(plain.bytes, strlen(manifest));
	free(p);
	free(z);
	close(pfd);
	close(zfd);
}

/*
 * What the writer puts in the tar stream, read back by libarchive: the
 * names in order, parts of at most the part size, the metadata, each
 * entry's digest and the trailer.
 */
static void
test_layout(void **state)
{
	struct fixture		*f = *state;
	struct archive		*a;
	struct archive_entry	*e;
	const char		*xn;
	const void		*xv;
	char			*img, *data, hex[17], sums[4096], want[64];
	size_t			 len, xl, i = 0, dlen;
	uint64_t		 total = 0;
	int			 fd, have;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	assert_non_null(data = malloc(PART + 1));
	assert_non_null(a = archive_read_new());
	assert_int_equal(archive_read_support_format_tar(a), ARCHIVE_OK);
	assert_int_equal(archive_read_open_memory(a, img, len), ARCHIVE_OK);
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		assert_true(i < NELEM(layout));
		assert_string_equal(archive_entry_pathname(e), layout[i]);
		assert_int_equal(archive_entry_filetype(e), AE_IFREG);
		assert_int_equal(archive_entry_perm(e), 0600);
		assert_int_equal(archive_entry_uid(e), 0);
		assert_int_equal(archive_entry_gid(e), 0);
		assert_string_equal(archive_entry_uname(e), "root");
		assert_string_equal(archive_entry_gname(e), "root");
		assert_null(archive_entry_hardlink(e));
		if (i > 0 && i + 1 < NELEM(layout))
			assert_true(archive_entry_size(e) <= PART);
		dlen = (size_t)archive_entry_size(e);
		if (i + 1 == NELEM(layout)) {
			assert_true(dlen < sizeof sums);
			assert_int_equal(archive_read_data(a, sums, dlen),
			    (la_ssize_t)dlen);
			sums[dlen] = '\0';
		} else {
			if (dlen > PART) {
				/* Only the manifest may be larger. */
				assert_int_equal(i, 0);
				data = realloc(data, dlen);
				assert_non_null(data);
			}
			assert_int_equal(archive_read_data(a, data, dlen),
			    (la_ssize_t)dlen);
		}
		if (i == 0)
			assert_memory_equal(data, manifest, dlen);
		hex64(XXH3_64bits(i + 1 == NELEM(layout) ? sums : data,
		    dlen), hex);
		have = 0;
		archive_entry_xattr_reset(e);
		while (archive_entry_xattr_next(e, &xn, &xv, &xl) ==
		    ARCHIVE_OK) {
			assert_string_equal(xn, "gpuckpt.xxh3");
			assert_int_equal(xl, 16);
			assert_memory_equal(xv, hex, 16);
			have++;
		}
		assert_int_equal(have, 1);
		if (i + 1 < NELEM(layout))
			total += dlen;
		i++;
	}
	assert_int_equal(i, NELEM(layout));
	archive_read_free(a);

	/* The trailer: every entry before it, in order, and the totals. */
	assert_non_null(strstr(sums, "\"format\":1"));
	assert_non_null(strstr(sums, "\"count\":12"));
	snprintf(want, sizeof want, "\"bytes\":%" PRIu64 "}", total);
	assert_non_null(strstr(sums, want));
	assert_true(strstr(sums, "\"criu/pages-1.img.part00004\"") <
	    strstr(sums, "\"criu/pages-1.img.part00005\""));
	assert_non_null(strstr(sums, "\"criu/core-4242.img\",\"size\":0"));
	assert_null(strstr(sums, "gpuckpt.sums"));
	free(data);
	free(img);
	close(fd);
}

/* A standard reader takes the compressed stream too. */
static void
test_layout_zstd(void **state)
{
	struct fixture		*f = *state;
	struct archive		*a;
	struct archive_entry	*e;
	char			*img;
	size_t			 len, i = 0;
	int			 fd;

	fd = make_image(f->u.ctx, 3, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	assert_non_null(a = archive_read_new());
	assert_int_equal(archive_read_support_format_tar(a), ARCHIVE_OK);
	if (archive_read_support_filter_zstd(a) != ARCHIVE_OK) {
		archive_read_free(a);
		free(img);
		close(fd);
		skip();
	}
	assert_int_equal(archive_read_open_memory(a, img, len), ARCHIVE_OK);
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		assert_true(i < NELEM(layout));
		assert_string_equal(archive_entry_pathname(e), layout[i]);
		i++;
	}
	assert_int_equal(i, NELEM(layout));
	assert_int_equal(archive_filter_code(a, 0), ARCHIVE_FILTER_ZSTD);
	archive_read_free(a);
	free(img);
	close(fd);
}

static void
test_verify_only(void **state)
{
	struct fixture		*f = *state;
	struct gck_image_stats	 st;
	int			 fd, level;

	for (level = 0; level <= 3; level += 3) {
		fd = make_image(f->u.ctx, level, PART, manifest, files,
		    NELEM(files));
		assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, &st), GCK_OK,
		    NULL);
		assert_int_equal(st.entries, NELEM(layout));
		assert_int_equal(st.compressed, level > 0);
		close(fd);
	}
	assert_int_equal(count_dir(f->dir), 0);
	assert_int_equal(count_dir(f->u.dir), 1);
}

/* Part size 0 is the default, 16 MiB: no file of the test is split. */
static void
test_default_part_size(void **state)
{
	struct fixture		*f = *state;
	struct archive		*a;
	struct archive_entry	*e;
	char			*img;
	size_t			 len, n = 0;
	int			 fd;

	fd = make_image(f->u.ctx, 0, 0, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	assert_non_null(a = archive_read_new());
	assert_int_equal(archive_read_support_format_tar(a), ARCHIVE_OK);
	assert_int_equal(archive_read_open_memory(a, img, len), ARCHIVE_OK);
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		assert_null(strstr(archive_entry_pathname(e), ".part"));
		n++;
	}
	assert_int_equal(n, NELEM(files) + 2);
	archive_read_free(a);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL), GCK_OK,
	    NULL);
	check_files(f->dirfd, files, NELEM(files));
	free(img);
	close(fd);
}

static void
test_part_size_too_large(void **state)
{
	struct fixture		*f = *state;
	struct gck_writer	*w = (struct gck_writer *)(uintptr_t)1;
	int			 fd;

	fd = unit_memfd_ok(NULL, 0);
	assert_int_not_equal(fd, -1);
	assert_gck(f->u.ctx, gck_writer_new2(f->u.ctx, fd, 0,
	    (size_t)GCK_PART_MAX + 1, 1, 0, &w), GCK_EINVAL, "part size");
	assert_null(w);
	assert_non_null(strstr(gck_error_string(f->u.ctx), "67108865"));
	assert_int_equal(lseek(fd, 0, SEEK_END), 0);
	close(fd);
}

/* Only plain CRIU file names are stored; a refusal leaves no trace. */
static void
test_bad_file_names(void **state)
{
	static const char *const bad[] = { "../x", ".hidden", "a/b", "",
	    "/etc/passwd", "..", ".", "x y", "name\\x", "a*", "a:b" };
	struct fixture		*f = *state;
	struct gck_writer	*w;
	struct gck_image_stats	 st;
	char			 longname[256];
	size_t			 i;
	int			 fd, dfd;

	fd = unit_memfd_ok(NULL, 0);
	assert_int_not_equal(fd, -1);
	dfd = unit_memfd_ok("data", 4);
	assert_gck(f->u.ctx, gck_writer_new2(f->u.ctx, fd, 0, PART, 1, 0, &w), GCK_OK,
	    NULL);
	assert_gck(f->u.ctx, gck_writer_add(w, "gpuckpt.json", manifest,
	    strlen(manifest)), GCK_OK, NULL);
	for (i = 0; i < NELEM(bad); i++) {
		assert_gck(f->u.ctx, gck_writer_add_file(w, bad[i], dfd),
		    GCK_EINVAL, "not a CRIU image file name");
		if (*bad[i] != '\0')
			assert_non_null(strstr(gck_error_string(f->u.ctx),
			    bad[i]));
	}
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	assert_gck(f->u.ctx, gck_writer_add_file(w, longname, dfd),
	    GCK_EINVAL, "not a CRIU image file name");
	/* The good names pass, dots and dashes included. */
	assert_gck(f->u.ctx, gck_writer_add_file(w, "ok-1_x.img", dfd), GCK_OK,
	    NULL);
	assert_gck(f->u.ctx, gck_writer_finish(w), GCK_OK, NULL);
	gck_writer_free(w);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, &st), GCK_OK,
	    NULL);
	assert_int_equal(st.entries, 3);
	assert_int_equal(count_dir(f->dir), 1);
	assert_int_equal(faccessat(f->dirfd, "ok-1_x.img", F_OK, 0), 0);
	close(dfd);
	close(fd);
}

/* A manifest and nothing else is an image. */
static void
test_no_files(void **state)
{
	struct fixture	*f = *state;
	int		 fd;

	fd = make_image(f->u.ctx, 3, PART, manifest, NULL, 0);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL), GCK_OK,
	    NULL);
	assert_int_equal(count_dir(f->dir), 0);
	close(fd);
}

/* From a pipe, the zstd magic arriving a byte at a time. */
static void
test_pipe_input(void **state)
{
	struct fixture		*f = *state;
	struct gck_image_stats	 st;
	char			*img;
	size_t			 len, off;
	ssize_t			 n;
	pid_t			 pid;
	int			 fd, p[2], status;

	fd = make_image(f->u.ctx, 3, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	assert_int_equal(pipe(p), 0);
	assert_int_not_equal(pid = fork(), -1);
	if (pid == 0) {
		close(p[0]);
		for (off = 0; off < len; off += (size_t)n) {
			n = write(p[1], img + off, off < 6 ? 1 :
			    len - off < 1000 ? len - off : 1000);
			if (n <= 0)
				break;
			if (off < 6)
				usleep(2000);
		}
		free(img);
		_exit(off == len ? 0 : 1);
	}
	close(p[1]);
	assert_gck(f->u.ctx, read_image(f->u.ctx, p[0], f->dirfd, &st), GCK_OK,
	    NULL);
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	check_files(f->dirfd, files, NELEM(files));
	assert_int_equal(st.compressed, 1);
	free(img);
}

/* Work files are created, never overwritten. */
static void
test_extract_existing(void **state)
{
	struct fixture	*f = *state;
	int		 fd;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL), GCK_OK,
	    NULL);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL), GCK_ESYS,
	    "cannot create work file 'inventory.img'");
	assert_int_equal(gck_errno(f->u.ctx), EEXIST);
	check_files(f->dirfd, files, NELEM(files));
	close(fd);
}

static void
test_empty_input(void **state)
{
	struct fixture	*f = *state;
	size_t		 zlen;
	char		*z;
	int		 fd;

	assert_gck(f->u.ctx, read_buf(f->u.ctx, "", 0, -1), GCK_EFORMAT,
	    "empty input");

	/* /dev/null, as a shell would pass it. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_not_equal(fd, -1);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "empty input");
	close(fd);

	/* An empty zstd frame holds no tar stream either. */
	z = zstd_frame("", 0, &zlen);
	assert_gck(f->u.ctx, read_buf(f->u.ctx, z, zlen, -1), GCK_EFORMAT,
	    "not a gpuckpt image: the zstd stream is empty");
	free(z);
}

static void
test_garbage(void **state)
{
	struct fixture	*f = *state;
	char		*buf;
	size_t		 len = 64 * 1024, i;

	assert_non_null(buf = malloc(len));
	fill(buf, len, 42);
	assert_gck(f->u.ctx, read_buf(f->u.ctx, buf, len, -1), GCK_EFORMAT,
	    "not a gpuckpt image");
	for (i = 0; i < len; i++)
		buf[i] = "Lorem ipsum dolor sit amet\n"[i % 27];
	assert_gck(f->u.ctx, read_buf(f->u.ctx, buf, len, -1), GCK_EFORMAT,
	    "not a gpuckpt image");
	/* An ELF header, as when a binary is fed by mistake. */
	memcpy(buf, "\x7f" "ELF\x02\x01\x01", 7);
	assert_gck(f->u.ctx, read_buf(f->u.ctx, buf, len, -1), GCK_EFORMAT,
	    "not a gpuckpt image");
	/* A whole tar block of zeros: a tar stream with no entries. */
	memset(buf, 0, 512);
	assert_gck(f->u.ctx, read_buf(f->u.ctx, buf, 512, -1), GCK_EFORMAT,
	    "not a gpuckpt image");
	/* Less than a tar block: no header of the manifest begins so. */
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "hello\n", 6, -1), GCK_EFORMAT,
	    "not a gpuckpt image: no tar header for 'gpuckpt.json' at the "
	    "start");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "P", 1, -1), GCK_ETRUNC,
	    "image truncated at the start");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "Pax", 3, -1), GCK_ETRUNC,
	    "image truncated at the start");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "Pay", 3, -1), GCK_EFORMAT,
	    "not a gpuckpt image");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "./PaxHeaders.123", 16, -1),
	    GCK_ETRUNC, "image truncated at the start");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "./PaxHeaders./", 14, -1),
	    GCK_EFORMAT, "not a gpuckpt image");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "././@PaxHeader\0\0", 16, -1),
	    GCK_ETRUNC, "image truncated at the start");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "gpuckpt.json.x\0", 15, -1),
	    GCK_EFORMAT, "not a gpuckpt image");
	/* The first bytes of the zstd magic begin a compressed image. */
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "\x28\xb5", 2, -1), GCK_ETRUNC,
	    "image truncated at the start");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, "\x28\xb6", 2, -1), GCK_EFORMAT,
	    "not a gpuckpt image");
	/* Text longer than a tar block. */
	for (i = 0; i < len; i++)
		buf[i] = "Lorem ipsum dolor sit amet\n"[i % 27];
	assert_gck(f->u.ctx, read_buf(f->u.ctx, buf, 2000, -1), GCK_EFORMAT,
	    "not a gpuckpt image: no tar header for 'gpuckpt.json' at the "
	    "start");
	free(buf);
}

/*
 * The head of a sound image cut short, or something else compressed:
 * truncated, or no image, by what the stream held.
 */
static void
test_cut_head(void **state)
{
	struct fixture	*f = *state;
	char		*img, *z;
	size_t		 len, zlen, i, off[] = { 1, 6, 99, 100, 101, 156, 157,
	    258, 300, 511, 512, 600 };
	int		 fd, r, bad = 0;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	for (i = 0; i < NELEM(off); i++) {
		r = read_buf(f->u.ctx, img, off[i], -1);
		if (r != GCK_ETRUNC || strncmp(gck_error_string(f->u.ctx),
		    "image truncated at the start", 28) != 0) {
			print_message("# cut at %zu: %d %s\n", off[i], r,
			    gck_error_string(f->u.ctx));
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	/* A cut head, compressed whole: still truncated. */
	z = zstd_frame(img, 300, &zlen);
	assert_gck(f->u.ctx, read_buf(f->u.ctx, z, zlen, -1), GCK_ETRUNC,
	    "image truncated at the start (tar offset 300)");
	free(z);
	/* A text, compressed: no image. */
	z = zstd_frame("hi\n", 3, &zlen);
	assert_gck(f->u.ctx, read_buf(f->u.ctx, z, zlen, -1), GCK_EFORMAT,
	    "not a gpuckpt image: no tar header for 'gpuckpt.json' at the "
	    "start of the zstd stream");
	free(z);
	free(img);
}

static void
test_first_not_manifest(void **state)
{
	struct fixture	*f = *state;
	struct hb	 h;
	int		 fd;

	hb_start(&h);
	hb_add_str(&h, "criu/inventory.img", "inventory");
	hb_add_str(&h, "gpuckpt.json", manifest);
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "not a gpuckpt image: first entry is 'criu/inventory.img'");
	close(fd);

	/* A tar of something else entirely. */
	hb_start(&h);
	hb_add_str(&h, "README", "hello\n");
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "not a gpuckpt image");
	close(fd);

	/* A tar with no entries. */
	hb_start(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "not a gpuckpt image");
	close(fd);

	/* The manifest in a subdirectory is not the manifest. */
	hb_start(&h);
	hb_add_str(&h, "x/gpuckpt.json", manifest);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "first entry is 'x/gpuckpt.json'");
	close(fd);
}

static void
test_newer_image(void **state)
{
	struct fixture	*f = *state;
	int		 fd;

	fd = make_image(f->u.ctx, 4, PART, "{\"format\":4,\"whatever\":[]}",
	    files, 1);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL),
	    GCK_EVERSION, "version 4 is newer");
	assert_int_equal(count_dir(f->dir), 0);
	close(fd);
}

/*
 * Returns the offset of the end-of-archive blocks of an uncompressed
 * image: the end of the trailer's data, which holds the last non-zero
 * byte.
 */
static size_t
eoa_offset(const char *img, size_t len)
{
	while (len > 0 && img[len - 1] == 0)
		len--;
	assert_true(len > 0);
	return (len + 511) / 512 * 512;
}

/*
 * An uncompressed image cut at every block boundary, and inside every
 * block, is truncated.  (The end-of-archive blocks: see below.)
 */
static void
test_truncated_plain(void **state)
{
	struct fixture	*f = *state;
	const char	*e;
	char		*img;
	size_t		 len, off, eoa;
	int		 fd, r, bad = 0;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	eoa = eoa_offset(img, len);
	for (off = 1; off < len; off += off % 512 == 0 ? 100 :
	    512 - off % 512) {
		if (off >= eoa && off < eoa + 1024)
			continue;
		r = read_buf(f->u.ctx, img, off, -1);
		e = gck_error_string(f->u.ctx);
		if (r != GCK_ETRUNC || e == NULL ||
		    strstr(e, "truncated") == NULL) {
			print_message("# cut at %zu of %zu: %d %s\n", off,
			    len, r, e != NULL ? e : "(null)");
			bad++;
		}
	}
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len - 1, -1), GCK_ETRUNC,
	    "truncated");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, 700, -1), GCK_ETRUNC,
	    "truncated");
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, eoa + 1024, -1),
	    GCK_ETRUNC, "image truncated after the trailer");
	assert_int_equal(bad, 0);
	free(img);
}

/*
 * Cut right after the trailer, or inside the two zero blocks that end
 * the tar stream: the stream ends early, nothing follows it.
 */
static void
test_truncated_eoa(void **state)
{
	struct fixture	*f = *state;
	const char	*e;
	char		*img;
	size_t		 len, eoa, i, off[] = { 0, 1, 511, 512, 513, 1000,
	    1023 };
	int		 fd, r, bad = 0;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	eoa = eoa_offset(img, len);
	for (i = 0; i < NELEM(off); i++) {
		r = read_buf(f->u.ctx, img, eoa + off[i], -1);
		e = gck_error_string(f->u.ctx);
		if (r != GCK_ETRUNC || e == NULL ||
		    strstr(e, "truncated") == NULL) {
			print_message("# cut at %zu of %zu: %d %s\n",
			    eoa + off[i], len, r, e != NULL ? e : "(null)");
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	free(img);
}

static void
test_truncated_zstd(void **state)
{
	struct fixture	*f = *state;
	const char	*e;
	char		*img;
	size_t		 len, i, off[] = { 1, 2, 3, 4, 5, 6, 7, 10, 100, 0, 0,
	    0, 0, 0, 0 };
	int		 fd, r, bad = 0;

	fd = make_image(f->u.ctx, 3, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	off[9] = len / 4;
	off[10] = len / 2;
	off[11] = len - 100;
	off[12] = len - 5;
	off[13] = len - 4;		/* the content checksum is missing */
	off[14] = len - 1;
	for (i = 0; i < NELEM(off); i++) {
		r = read_buf(f->u.ctx, img, off[i], -1);
		e = gck_error_string(f->u.ctx);
		if (r != GCK_ETRUNC || e == NULL ||
		    strstr(e, "truncated") == NULL) {
			print_message("# cut at %zu of %zu: %d %s\n", off[i],
			    len, r, e != NULL ? e : "(null)");
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	free(img);
}

/*
 * A flipped bit anywhere in the compressed stream is caught, unless the
 * stream still decompresses to the very same tar stream (a bit zstd does
 * not use, a window size grown): then the image is intact.
 */
static void
test_flipped_zstd(void **state)
{
	struct fixture	*f = *state;
	char		*img, *tar, *alt;
	size_t		 len, off, step, tlen, alen, cap = 1u << 20;
	int		 fd, r, same, bad = 0, caught = 0;

	fd = make_image(f->u.ctx, 3, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	assert_non_null(tar = malloc(cap));
	assert_non_null(alt = malloc(cap));
	tlen = ZSTD_decompress(tar, cap, img, len);
	assert_false(ZSTD_isError(tlen));
	step = len / 150 + 1;
	for (off = 4; off < len; off += off + step < len ? step : 1) {
		img[off] ^= 0x10;
		alen = ZSTD_decompress(alt, cap, img, len);
		same = !ZSTD_isError(alen) && alen == tlen &&
		    memcmp(alt, tar, tlen) == 0;
		r = read_buf(f->u.ctx, img, len, -1);
		img[off] ^= 0x10;
		if (same && r != GCK_OK) {
			print_message("# flip at %zu of %zu: harmless, but "
			    "%d %s\n", off, len, r, gck_error_string(f->u.ctx));
			bad++;
		}
		if (!same && (r == GCK_OK ||
		    gck_error_string(f->u.ctx) == NULL)) {
			print_message("# flip at %zu of %zu read as intact\n",
			    off, len);
			bad++;
		}
		caught += !same;
	}
	assert_int_equal(bad, 0);
	assert_true(caught > 100);

	/* The magic flipped: no longer zstd, and not a tar either. */
	img[0] ^= 0x01;
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, -1), GCK_EFORMAT,
	    "not a gpuckpt image");
	free(alt);
	free(tar);
	free(img);
}

/* A flipped byte in a part of an uncompressed image: that part is named. */
static void
test_flipped_data(void **state)
{
	struct fixture	*f = *state;
	char		*img, *p;
	size_t		 len;
	int		 fd;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	assert_non_null(p = memmem(img, len, marker, sizeof marker - 1));
	p[5] ^= 0x01;
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, -1), GCK_ECORRUPT,
	    "checksum mismatch in 'pages-1.img' part 2");
	p[5] ^= 0x01;
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, -1), GCK_OK, NULL);

	/* The same while extracting. */
	p[sizeof marker - 2] ^= 0x80;
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, f->dirfd),
	    GCK_ECORRUPT, "checksum mismatch in 'pages-1.img' part 2");
	free(img);
}

/* The manifest still parses, but it is not what was written. */
static void
test_flipped_manifest(void **state)
{
	struct fixture	*f = *state;
	char		*img, *p;
	size_t		 len;
	int		 fd;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	assert_non_null(p = memmem(img, len, "sleeper", 7));
	p[0] = 'S';
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, -1), GCK_ECORRUPT,
	    "checksum mismatch in 'gpuckpt.json'");
	p[0] = 's';
	/* Its padding damaged is not taken for its digest. */
	assert_non_null(p = memmem(img, len, manifest, strlen(manifest)));
	assert_int_not_equal(strlen(manifest) % 512, 0);
	p[strlen(manifest)] = 'x';
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, -1), GCK_ECORRUPT,
	    "non-zero padding after an entry");
	p[strlen(manifest)] = '\0';
	/* A version flipped to a newer one is reported as such. */
	assert_non_null(p = memmem(img, len, "\"format\": 1", 11));
	p[10] = '4';
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, -1), GCK_EVERSION,
	    "newer");
	free(img);
}

/* A digest in a pax header changed: the entry no longer matches it. */
static void
test_flipped_digest(void **state)
{
	struct fixture	*f = *state;
	char		*img, *p, *q;
	size_t		 len;
	int		 fd;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	/* The first digest is the manifest's, the second inventory's. */
	assert_non_null(p = memmem(img, len, "gpuckpt.xxh3=", 13));
	q = p + 13;
	assert_non_null(p = memmem(q, len - (size_t)(q - img),
	    "gpuckpt.xxh3=", 13));
	p += 13 + 7;
	*p = *p == '0' ? '1' : '0';
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, -1), GCK_ECORRUPT,
	    "checksum mismatch in 'inventory.img'");
	/* Not hex: no digest at all. */
	*p = 'g';
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, -1), GCK_ECORRUPT,
	    "'criu/inventory.img' has no checksum");
	free(img);
}

static void
test_flipped_trailer(void **state)
{
	struct fixture	*f = *state;
	char		*img, *p;
	size_t		 len;
	int		 fd;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	assert_non_null(p = memmem(img, len, "\"count\":12", 10));
	p[9] = '3';
	assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len, f->dirfd),
	    GCK_ECORRUPT, "checksum mismatch in 'gpuckpt.sums'");
	free(img);
}

/* A damaged tar header is corruption, not truncation. */
static void
test_flipped_header(void **state)
{
	struct fixture	*f = *state;
	char		*img, *p;
	size_t		 len;
	int		 fd, r;

	fd = make_image(f->u.ctx, 0, PART, manifest, files, NELEM(files));
	img = slurp(fd, &len);
	close(fd);
	/* The name field of the ustar header of mm-4242.img. */
	assert_non_null(p = memmem(img, len, "criu/mm-4242.img\0", 17));
	assert_int_equal((p - img) % 512, 0);
	p[5] = 'M';
	r = read_buf(f->u.ctx, img, len, -1);
	assert_int_not_equal(r, GCK_OK);
	assert_gck(f->u.ctx, r, GCK_EFORMAT, "corrupt image");
	free(img);
}

/* The hand-built images the tests below break are valid when whole. */
static void
test_handbuilt_ok(void **state)
{
	struct fixture		*f = *state;
	struct gck_image_stats	 st;
	struct hb		 h;
	char			 buf[64];
	int			 fd, dfd;
	ssize_t			 n;

	hb_image_start(&h);
	hb_add_str(&h, "criu/inventory.img", "inventory");
	hb_add_str(&h, "criu/p.img.part00000", "first ");
	hb_add_str(&h, "criu/p.img.part00001", "second ");
	hb_add_str(&h, "criu/p.img.part00002", "third");
	hb_add(&h, "criu/empty.img", HK_REG, "", 0);
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, &st), GCK_OK,
	    NULL);
	assert_int_equal(st.entries, 7);
	assert_int_equal(st.bytes, strlen(manifest) + 9 + 18);
	assert_int_equal(count_dir(f->dir), 3);
	dfd = openat(f->dirfd, "p.img", O_RDONLY | O_CLOEXEC);
	assert_int_not_equal(dfd, -1);
	n = read(dfd, buf, sizeof buf - 1);
	assert_int_equal(n, 18);
	buf[n] = '\0';
	assert_string_equal(buf, "first second third");
	close(dfd);
	close(fd);
}

static void
test_missing_trailer(void **state)
{
	struct fixture	*f = *state;
	struct hb	 h;
	int		 fd;

	hb_image_start(&h);
	hb_add_str(&h, "criu/inventory.img", "inventory");
	hb_add_str(&h, "criu/pages-1.img.part00000", "pages");
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL),
	    GCK_ETRUNC, "no checksum trailer");
	assert_non_null(strstr(gck_error_string(f->u.ctx),
	    "after 'pages-1.img' part 0"));
	close(fd);

	/* Only the manifest. */
	hb_image_start(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_ETRUNC,
	    "image truncated after 'gpuckpt.json': no checksum trailer");
	close(fd);
}

/*
 * A writer freed without gck_writer_finish(): no trailer, no image.  Some
 * of it may have been written (uncompressed, it is), never the end.
 */
static void
test_writer_unfinished(void **state)
{
	static const struct tfile	 big = { "pages-2.img", 400000, 6 };
	struct fixture			*f = *state;
	struct gck_writer		*w;
	char				*data;
	int				 fd, dfd, level;

	data = file_data(&big);
	for (level = 0; level <= 3; level += 3) {
		fd = unit_memfd_ok(NULL, 0);
		assert_int_not_equal(fd, -1);
		dfd = unit_memfd_ok(data, big.size);
		assert_gck(f->u.ctx, gck_writer_new2(f->u.ctx, fd, level, PART, 1, 0, &w), GCK_OK, NULL);
		assert_gck(f->u.ctx, gck_writer_add(w, "gpuckpt.json", manifest,
		    strlen(manifest)), GCK_OK, NULL);
		assert_gck(f->u.ctx, gck_writer_add_file(w, big.name, dfd),
		    GCK_OK, NULL);
		gck_writer_free(w);
		close(dfd);
		if (level > 0 && lseek(fd, 0, SEEK_END) == 0) {
			/* zstd's workers held it all back: no image at all */
			assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL),
			    GCK_EFORMAT, "empty input: no image");
			close(fd);
			continue;
		}
		assert_true(lseek(fd, 0, SEEK_END) > 0);
		if (level == 0)
			assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd,
			    NULL), GCK_ETRUNC, "image truncated after "
			    "'pages-2.img' part");
		else
			assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL),
			    GCK_ETRUNC,
			    "image truncated after 'pages-2.img' part");
		close(fd);
	}
	free(data);
}

/* Entries no image holds: each is refused, nothing lands outside. */
static void
test_unsafe_entries(void **state)
{
	static const struct {
		const char	*name;
		enum hkind	 kind;
		const char	*why;
	} c[] = {
		{ "..", HK_REG, "path with '..'" },
		{ "../escaped", HK_REG, "path with '..'" },
		{ "criu/../escaped", HK_REG, "path with '..'" },
		{ "criu/x/..", HK_REG, "path with '..'" },
		{ "criu/link.img", HK_SYMLINK, "symbolic link" },
		{ "criu/hard.img", HK_HARDLINK, "hard link" },
		{ "criu/", HK_DIR, "directory" },
		{ "criu/sub/", HK_DIR, "directory" },
		{ "criu/null.img", HK_CHR, "device node" },
		{ "criu/fifo.img", HK_FIFO, "fifo" },
		{ "escaped.img", HK_REG, "unexpected name" },
		{ "other/core.img", HK_REG, "unexpected name" },
		{ "criu/sub/core.img", HK_REG, "unexpected name" },
		{ "criu/.hidden", HK_REG, "unexpected name" },
		/* Old tar: a regular file named with a slash is a directory. */
		{ "criu/", HK_REG, "directory" },
		{ "./criu/core.img", HK_REG, "unexpected name" },
	};
	struct fixture	*f = *state;
	struct hb	 h;
	char		 want[256];
	size_t		 i;
	int		 fd;

	for (i = 0; i < NELEM(c); i++) {
		hb_image_start(&h);
		hb_add_str(&h, "criu/inventory.img", "inventory");
		hb_add(&h, c[i].name, c[i].kind, "x", 1);
		hb_trailer(&h);
		fd = hb_finish(&h);
		snprintf(want, sizeof want, "unsafe entry '%s': %s",
		    c[i].name, c[i].why);
		assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL),
		    GCK_EUNSAFE, want);
		close(fd);
		assert_int_equal(count_dir(f->u.dir), 1);
		assert_true(count_dir(f->dir) <= 1);
		unlinkat(f->dirfd, "inventory.img", 0);
	}
}

/* A name from the stream cannot break the one-line message. */
static void
test_unsafe_name_printed(void **state)
{
	static const char *const names[] = { "criu/evil\nimg",
	    "criu/\033[2J\033[31mred.img", "other/x\r\ny", "/abs\nx" };
	struct fixture	*f = *state;
	const char	*e, *p;
	struct hb	 h;
	size_t		 i;
	int		 fd, bad = 0;

	for (i = 0; i < NELEM(names); i++) {
		hb_image_start(&h);
		hb_add_str(&h, names[i], "x");
		hb_trailer(&h);
		fd = hb_finish(&h);
		assert_int_equal(read_image(f->u.ctx, fd, -1, NULL),
		    GCK_EUNSAFE);
		close(fd);
		assert_non_null(e = gck_error_string(f->u.ctx));
		assert_non_null(strstr(e, "unsafe entry"));
		for (p = e; *p != '\0'; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				break;
		if (*p != '\0') {
			print_message("# control character %#x in the "
			    "message for entry %zu\n", (unsigned char)*p, i);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

static void
test_unsafe_absolute(void **state)
{
	struct fixture	*f = *state;
	struct hb	 h;
	char		 path[PATH_MAX + 64];
	int		 fd;

	/* A path that would land next to the extraction directory. */
	snprintf(path, sizeof path, "%s/escaped.img", f->u.dir);
	hb_image_start(&h);
	hb_add(&h, path, HK_REG, "x", 1);
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL),
	    GCK_EUNSAFE, "unsafe entry '/");
	assert_non_null(strstr(gck_error_string(f->u.ctx), "absolute path"));
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(count_dir(f->u.dir), 1);
	close(fd);

	hb_image_start(&h);
	hb_add(&h, "/criu/inventory.img", HK_REG, "x", 1);
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL),
	    GCK_EUNSAFE, "unsafe entry '/criu/inventory.img': absolute path");
	close(fd);
}

static void
test_entry_after_trailer(void **state)
{
	struct fixture	*f = *state;
	struct hb	 h;
	int		 fd;

	hb_image_start(&h);
	hb_add_str(&h, "criu/inventory.img", "inventory");
	hb_trailer(&h);
	hb_add_str(&h, "criu/late.img", "late");
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL),
	    GCK_EFORMAT, "entry 'criu/late.img' after the trailer");
	close(fd);

	/* A second trailer is an entry after the trailer too. */
	hb_image_start(&h);
	hb_trailer(&h);
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "after the trailer");
	close(fd);
}

static void
test_duplicate_file(void **state)
{
	struct fixture	*f = *state;
	struct hb	 h;
	int		 fd;

	hb_image_start(&h);
	hb_add_str(&h, "criu/inventory.img", "inventory");
	hb_add_str(&h, "criu/core.img", "one");
	hb_add_str(&h, "criu/core.img", "two");
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "'core.img' appears twice");
	close(fd);

	/* A whole file and the first part of one by the same name. */
	hb_image_start(&h);
	hb_add_str(&h, "criu/pages.img", "whole");
	hb_add_str(&h, "criu/inventory.img", "inventory");
	hb_add_str(&h, "criu/pages.img.part00000", "part");
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL),
	    GCK_EFORMAT, "'pages.img' appears twice");
	close(fd);
}

static void
test_parts_out_of_order(void **state)
{
	static const char *const seq[][3] = {
		{ "criu/p.img.part00000", "criu/p.img.part00002", NULL },
		{ "criu/p.img.part00001", "criu/p.img.part00000", NULL },
		{ "criu/p.img.part00000", "criu/q.img",
		    "criu/p.img.part00001" },
		{ "criu/p.img.part00000", "criu/p.img.part00001",
		    "criu/p.img.part00001" },
		{ "criu/p.img", "criu/p.img.part00001", NULL },
	};
	static const char *const why[] = {
		"part 2 of 'p.img' out of order",
		"part 1 of 'p.img' out of order",
		"part 1 of 'p.img' out of order",
		"part 1 of 'p.img' out of order",
		"part 1 of 'p.img' out of order",
	};
	struct fixture	*f = *state;
	struct hb	 h;
	size_t		 i, j;
	int		 fd;

	for (i = 0; i < NELEM(seq); i++) {
		hb_image_start(&h);
		for (j = 0; j < 3 && seq[i][j] != NULL; j++)
			hb_add_str(&h, seq[i][j], "data");
		hb_trailer(&h);
		fd = hb_finish(&h);
		assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL),
		    GCK_EFORMAT, why[i]);
		close(fd);
	}
}

static void
test_second_manifest(void **state)
{
	struct fixture	*f = *state;
	struct hb	 h;
	int		 fd;

	hb_image_start(&h);
	hb_add_str(&h, "gpuckpt.json", manifest);
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "second manifest");
	close(fd);
}

static void
test_digest_missing(void **state)
{
	struct fixture	*f = *state;
	struct hb	 h;
	int		 fd;

	hb_image_start(&h);
	hb_add(&h, "criu/inventory.img", HK_NODIGEST, "inventory", 9);
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_ECORRUPT,
	    "entry 'criu/inventory.img' has no checksum");
	close(fd);

	/* Not even the manifest has one: a plain tar of the right names. */
	hb_start(&h);
	hb_add(&h, "gpuckpt.json", HK_NODIGEST, manifest, strlen(manifest));
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_ECORRUPT,
	    "entry 'gpuckpt.json' has no checksum");
	close(fd);
}

static void
test_digest_wrong(void **state)
{
	struct fixture	*f = *state;
	struct hb	 h;
	int		 fd;

	hb_image_start(&h);
	hb_add_str(&h, "criu/inventory.img", "inventory");
	hb_add(&h, "criu/core.img", HK_BADDIGEST, "core", 4);
	hb_trailer(&h);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL),
	    GCK_ECORRUPT, "checksum mismatch in 'core.img'");
	close(fd);
}

static void
test_trailer_mismatch(void **state)
{
	struct fixture	*f = *state;
	struct hb	 h;
	char		*t;
	int		 fd;

	/* It leaves out the last entry. */
	hb_image_start(&h);
	hb_add_str(&h, "criu/inventory.img", "inventory");
	assert_int_equal(fflush(h.sums), 0);
	assert_true(asprintf(&t, "{\"format\":1,\"entries\":[%s],"
	    "\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", h.sbuf, h.count,
	    h.bytes) > 0);
	hb_add_str(&h, "criu/core.img", "core");
	hb_add_str(&h, "gpuckpt.sums", t);
	free(t);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_ECORRUPT,
	    "trailer lists 2 entries");
	close(fd);

	/* The right count, the wrong digest for the second entry. */
	hb_image_start(&h);
	hb_add_str(&h, "criu/inventory.img", "inventory");
	assert_true(asprintf(&t, "{\"format\":1,\"entries\":["
	    "{\"name\":\"gpuckpt.json\",\"size\":%zu,\"xxh3\":\"%016" PRIx64
	    "\"},{\"name\":\"criu/inventory.img\",\"size\":9,"
	    "\"xxh3\":\"0123456789abcdef\"}],\"count\":2,\"bytes\":%zu}",
	    strlen(manifest), (uint64_t)XXH3_64bits(manifest,
	    strlen(manifest)), strlen(manifest) + 9) > 0);
	hb_add_str(&h, "gpuckpt.sums", t);
	free(t);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_ECORRUPT,
	    "trailer does not match entry 2 ('criu/inventory.img')");
	close(fd);

	/* Not JSON. */
	hb_image_start(&h);
	hb_add_str(&h, "gpuckpt.sums", "not json");
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "unreadable checksum trailer");
	close(fd);
}

/* The size in the header is checked before any data is read. */
static void
test_oversized_entry(void **state)
{
	struct fixture		*f = *state;
	struct archive_entry	*e;
	struct hb		 h;
	int			 fd;

	hb_image_start(&h);
	assert_non_null(e = archive_entry_new());
	archive_entry_set_pathname(e, "criu/pages-1.img");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0600);
	archive_entry_set_size(e, (la_int64_t)GCK_PART_MAX + 1);
	archive_entry_xattr_add_entry(e, "gpuckpt.xxh3", "0123456789abcdef",
	    16);
	assert_int_equal(archive_write_header(h.a, e), ARCHIVE_OK);
	archive_entry_free(e);
	/* Closing pads the entry with zeros to its size. */
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, f->dirfd, NULL),
	    GCK_EFORMAT, "entry 'criu/pages-1.img' too large");
	assert_int_equal(count_dir(f->dir), 0);
	close(fd);

	/* The manifest has a lower limit. */
	hb_start(&h);
	assert_non_null(e = archive_entry_new());
	archive_entry_set_pathname(e, "gpuckpt.json");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0600);
	archive_entry_set_size(e, (la_int64_t)GCK_META_MAX + 1);
	archive_entry_xattr_add_entry(e, "gpuckpt.xxh3", "0123456789abcdef",
	    16);
	assert_int_equal(archive_write_header(h.a, e), ARCHIVE_OK);
	archive_entry_free(e);
	fd = hb_finish(&h);
	assert_gck(f->u.ctx, read_image(f->u.ctx, fd, -1, NULL), GCK_EFORMAT,
	    "entry 'gpuckpt.json' too large");
	close(fd);
}

static void
test_data_after_end(void **state)
{
	struct fixture	*f = *state;
	char		*img;
	size_t		 len;
	int		 fd, level;

	for (level = 0; level <= 3; level += 3) {
		fd = make_image(f->u.ctx, level, PART, manifest, files,
		    NELEM(files));
		img = slurp(fd, &len);
		close(fd);
		assert_non_null(img = realloc(img, len + 2 * RECORD));
		/* Zero records may follow a tar stream, */
		memset(img + len, 0, 2 * RECORD);
		if (level == 0)
			assert_gck(f->u.ctx, read_buf(f->u.ctx, img,
			    len + RECORD, -1), GCK_OK, NULL);
		/* but nothing else may. */
		memcpy(img + len + RECORD - 5, "extra", 5);
		assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len + RECORD, -1),
		    GCK_EFORMAT, level == 0 ?
		    "data after the end of the image" :
		    "data after the end of the compressed stream");
		memcpy(img + len, "junk\n", 5);
		assert_gck(f->u.ctx, read_buf(f->u.ctx, img, len + 5, -1),
		    GCK_EFORMAT, "data after the end");
		free(img);
	}
}

static void
test_free_null(void **state)
{
	gck_writer_free(NULL);
	gck_reader_free(NULL);
}

/*
 * The memo of --live: a chunk read before is found by its bytes, with
 * the digest it had; other bytes, or the same bytes cut shorter, are not.
 */
#define CPG	GCK_CHUNK_PAGE
#define NPG	3000		/* pages of random bytes */

/*
 * Cuts the pages at buf (n of them) as the writer does, the next
 * chunk's pages given to the scanner a few at a time, bounded pieces
 * or not; stores each chunk's first page's index and its length in
 * pages.  Returns the number of chunks.
 */
static size_t
cut_pages(const char *buf, size_t n, size_t step, size_t *at,
    size_t *len)
{
	struct gck_chunker	 ck;
	size_t			 start = 0, scanned = 0, k = 0, c, m;

	gck_chunker_start(&ck);
	while (start < n) {
		m = start + scanned + step <= n ? step : n - start - scanned;
		c = gck_chunker_scan(&ck, buf + (start + scanned) * CPG,
		    m * CPG);
		if (c == 0 && start + scanned + m < n) {
			scanned += m;
			continue;
		}
		c = c == 0 ? m : c / CPG;
		at[k] = start;
		len[k++] = scanned + c;
		start += scanned + c;
		scanned = 0;
	}
	return k;
}

/* One page of random bytes from x on; returns the next x. */
static uint64_t
rand_page(char *p, uint64_t x)
{
	size_t	i;

	for (i = 0; i < CPG; i += 8) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		memcpy(p + i, &x, 8);
	}
	return x;
}

/*
 * The chunker: chunks of at most GCK_CHUNK_SIZE, however the pages come;
 * the same cuts for the same pages after others were put before them;
 * no cut after a page of zeros, nor in a run of like pages.
 */
static void
test_chunker(void **state)
{
	static char	 buf[(NPG + 200) * CPG];
	static size_t	 at[NPG + 200], len[NPG + 200], at2[NPG + 200],
			 len2[NPG + 200];
	struct gck_chunker ck;
	uint64_t	 x = 42;
	size_t		 i, j, k, k2, f, total, first;

	(void)state;
	for (i = 0; i < NPG + 200; i++)
		x = rand_page(buf + i * CPG, x);
	k = cut_pages(buf + 200 * CPG, NPG, GCK_CHUNK_SIZE / CPG, at, len);
	assert_int_equal(k, cut_pages(buf + 200 * CPG, NPG, 3, at2, len2));
	for (i = 0, total = 0; i < k; i++) {
		assert_int_equal(at[i], at2[i]);
		assert_int_equal(len[i], len2[i]);
		assert_true(len[i] >= 1 && len[i] <= GCK_CHUNK_SIZE / CPG);
		total += len[i];
	}
	assert_int_equal(total, NPG);
	/* cut where the pages say: 3000 pages make about 27 chunks */
	assert_true(k >= 12 && k <= 60);
	/* 37 other pages before the same ones: the same cuts from the
	 * first the pages chose on */
	k2 = cut_pages(buf + 163 * CPG, NPG + 37, GCK_CHUNK_SIZE / CPG, at2,
	    len2);
	for (f = 0; f < k && len[f] == GCK_CHUNK_SIZE / CPG; f++)
		;
	assert_true(f + 2 < k);
	first = at[f + 1] + 37;
	for (j = 0; j < k2 && at2[j] != first; j++)
		;
	assert_true(j < k2);
	assert_int_equal(k2 - j, k - f - 1);
	for (i = f + 1; i < k; i++, j++) {
		assert_int_equal(at2[j], at[i] + 37);
		assert_int_equal(len2[j], len[i]);
	}
	/* pages of zeros, or like pages, never end a chunk: only the size */
	memset(buf, 0, 600 * CPG);
	k = cut_pages(buf, 600, 7, at, len);
	assert_int_equal(k, 3);
	assert_int_equal(len[0], GCK_CHUNK_SIZE / CPG);
	/* a page that ends a chunk, 600 times over: only the first does */
	for (x = 0; ; x++) {
		memset(buf, 0x5a, CPG);
		memcpy(buf, &x, sizeof x);
		gck_chunker_start(&ck);
		if (gck_chunker_scan(&ck, buf, CPG) == CPG)
			break;
	}
	for (i = 1; i < 600; i++)
		memcpy(buf + i * CPG, buf, CPG);
	k = cut_pages(buf, 600, 5, at, len);
	assert_int_equal(k, 4);
	assert_int_equal(len[0], 1);
	assert_int_equal(len[1], GCK_CHUNK_SIZE / CPG);
	assert_int_equal(len[3], 599 - 2 * (GCK_CHUNK_SIZE / CPG));
}

static void
test_memo(void **state)
{
	struct gck_memo		*m;
	struct gck_digest	 d, got;
	static uint64_t		 buf[3000][512];
	size_t			 i;

	(void)state;
	assert_non_null(m = gck_memo_new());
	assert_int_equal(gck_memo_find(m, buf[0], sizeof buf[0], &got), 0);
	for (i = 0; i < 3000; i++) {
		buf[i][0] = i;
		buf[i][511] = ~i;
		assert_int_equal(gck_digest_buf(GCK_DK_SHA256, buf[i],
		    sizeof buf[i], &d), 0);
		gck_memo_add(m, buf[i], sizeof buf[i], &d);
	}
	for (i = 0; i < 3000; i++) {
		assert_int_equal(gck_digest_buf(GCK_DK_SHA256, buf[i],
		    sizeof buf[i], &d), 0);
		memset(&got, 0, sizeof got);
		assert_int_equal(gck_memo_find(m, buf[i], sizeof buf[i],
		    &got), 1);
		assert_true(gck_digest_equal(&d, &got));
		assert_int_equal(gck_memo_find(m, buf[i], sizeof buf[i] - 8,
		    &got), 0);
	}
	buf[7][3] = 1;
	assert_int_equal(gck_memo_find(m, buf[7], sizeof buf[7], &got), 0);
	gck_memo_free(m);
	gck_memo_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_roundtrip_plain, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_roundtrip_zstd, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layout_zstd, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_verify_only, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_default_part_size, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_part_size_too_large,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_file_names, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_no_files, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_pipe_input, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_extract_existing, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_empty_input, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut_head, setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_not_manifest,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_image, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_truncated_plain, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_truncated_eoa, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_truncated_zstd, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_flipped_zstd, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_flipped_data, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_flipped_manifest, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_flipped_digest, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_flipped_trailer, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_flipped_header, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_handbuilt_ok, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_missing_trailer, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_writer_unfinished, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_unsafe_entries, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_unsafe_name_printed,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsafe_absolute, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_entry_after_trailer,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_file, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_parts_out_of_order,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_manifest, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_digest_missing, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_digest_wrong, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_trailer_mismatch, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_oversized_entry, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_data_after_end, setup,
		    teardown),
		cmocka_unit_test(test_memo),
		cmocka_unit_test(test_chunker),
		cmocka_unit_test(test_free_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
