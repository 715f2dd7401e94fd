/*
 * fuzz_criu: CRIU's image files as gpuckpt parses them.  The bytes are
 * a list of files, each a selector byte, a 16-bit little-endian length
 * and the contents.  The low three bits of the selector and its bit 5
 * pick the name (names[], bit 5 the second eight), bit 3 puts the file
 * in image a, bit 4 in image b.
 *
 * The files of image a named pagemap-1.img and pages-1.img go through
 * gck_pmread_open(); when it takes them, the pages it lists are read
 * back from this process (their addresses are whatever the input says:
 * a read only copies what the kernel lets it) and checked for overlaps.
 * Then both sets are written as images with the library's writer and
 * compared with gck_inspect_diff(), which parses the mm, pagemap and
 * files images of both.  Image a is then described and checked as
 * gpuinspect does (gck_inspect_show(), gck_inspect_check(): the
 * processes of pstree.img, their descriptors, the files, sockets and
 * pipes these name), and its files, written into a directory, checked
 * as gpurestore does before criu restores them
 * (gck_needs_restore_check(): the TCP and UDP sockets, tried against
 * this host, with and without --tcp-close).
 */
#include "config.h"

#include <fcntl.h>

#include "private.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "image/image.h"
#include "ops/needs.h"
#include "fuzz.h"

#define READ_MAX	(256u << 10)

#define NNAMES	16

static const char *const names[NNAMES] = { "pagemap-1.img", "pages-1.img",
	"mm-1.img", "files.img", "pagemap-2.img", "pages-2.img", "mm-2.img",
	"pagemap-shmem-7.img", "pstree.img", "ids-1.img", "ids-2.img",
	"fdinfo-1.img", "fdinfo-2.img", "inventory.img", "fs-1.img",
	"remap-fpath.img" };

static char	*dir;
static int	 dfd = -1;

static const char manifest[] =
    "{\"format\": 1, \"tool\": \"fuzz\", \"created\": \"2026-01-01T00:00:00Z\","
    " \"root_pid\": 1, \"processes\": [{\"pid\": 1, \"comm\": \"one\"},"
    " {\"pid\": 2, \"comm\": \"two\"}]}";

struct file {
	int		 name;
	const uint8_t	*data;
	size_t		 len;
};

/* Parses the input into at most nmax files; returns how many. */
static size_t
split(const uint8_t *data, size_t size, struct file *f, int *in, size_t nmax)
{
	size_t	n = 0, len;

	while (size >= 3 && n < nmax) {
		len = (size_t)data[1] | (size_t)data[2] << 8;
		if (len > size - 3)
			len = size - 3;
		f[n].name = (data[0] & 7) | (data[0] >> 2 & 8);
		f[n].data = data + 3;
		f[n].len = len;
		in[n] = data[0] >> 3 & 3;
		n++;
		data += 3 + len;
		size -= 3 + len;
	}
	return n;
}

static void
pmread(struct gck_ctx *ctx, const struct file *pm, const struct file *pg)
{
	struct gck_sfile	 a, b;
	struct gck_pmread	*p = NULL;
	char			*buf;
	uint64_t		 off = 0, step;
	ssize_t			 n;
	int			 r;

	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	snprintf(a.name, sizeof a.name, "%s", names[pm->name]);
	a.fd = -1;
	a.data = (char *)pm->data;
	a.len = a.cap = pm->len;
	a.size = pm->len;
	snprintf(b.name, sizeof b.name, "%s", names[pg->name]);
	b.fd = -1;
	b.pages = 1;
	b.pid = getpid();
	b.size = pg->len;
	if ((r = gck_pmread_open(ctx, &a, &b, b.pid, &p)) != GCK_OK) {
		fuzz_say("pmread", r, gck_error_string(ctx));
		return;
	}
	step = b.size / 7 + 1;
	(void)gck_pmread_overlaps(p, 0, b.size, 0, UINT64_MAX);
	(void)gck_pmread_overlaps(p, step, step * 2, (uintptr_t)&a, sizeof a);
	(void)gck_pmread_overlaps(p, b.size, UINT64_MAX, step, UINT64_MAX);
	if ((buf = malloc(READ_MAX)) == NULL)
		abort();
	while (off < READ_MAX && (n = gck_pmread_read(p, buf, 4096)) > 0)
		off += (uint64_t)n;
	if (n == -1)
		(void)gck_pmread_error(p);
	free(buf);
	gck_pmread_free(p);
}

static void
cleanup(void)
{
	if (dir != NULL)
		fuzz_rmdir(dir);
}

/*
 * The files of image a in the directory, as gpurestore has them, checked
 * as it checks them before criu restores them.
 */
static void
restore_check(struct gck_ctx *ctx, const struct file *f, const int *in,
    size_t n)
{
	ssize_t	w;
	size_t	i;
	int	fd, seen = 0, r;

	if (dir == NULL) {
		dir = fuzz_tmpdir("criu");
		atexit(cleanup);
		if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
			abort();
	}
	for (i = 0; i < n; i++) {
		if (!(in[i] & 1) || seen & 1 << f[i].name)
			continue;
		seen |= 1 << f[i].name;
		if ((fd = openat(dfd, names[f[i].name], O_WRONLY | O_CREAT |
		    O_TRUNC | O_CLOEXEC, 0600)) == -1 ||
		    (w = write(fd, f[i].data, f[i].len)) != (ssize_t)f[i].len)
			abort();
		close(fd);
	}
	for (i = 0; i < 2; i++) {
		r = gck_needs_restore_check(ctx, dfd, NULL, NULL, (int)i);
		fuzz_say("restore check", r, gck_error_string(ctx));
		if (r != GCK_OK && gck_error_string(ctx) == NULL)
			abort();
	}
	fuzz_empty(dir);
}

/* Image a described, then checked, as gpuinspect does. */
static void
inspect(struct gck_ctx *ctx, int fd)
{
	char	*text = NULL;
	int	 fail, r;

	if (lseek(fd, 0, SEEK_SET) != 0)
		abort();
	r = gck_inspect_show(ctx, fd, &text);
	fuzz_say("show", r, r == GCK_OK ? text : gck_error_string(ctx));
	if (r == GCK_OK && (text == NULL || strlen(text) == 0))
		abort();
	free(text);
	text = NULL;
	if (lseek(fd, 0, SEEK_SET) != 0)
		abort();
	r = gck_inspect_check(ctx, fd, &text, &fail);
	fuzz_say("check", r, r == GCK_OK ? text : gck_error_string(ctx));
	if (r == GCK_OK && (text == NULL || strlen(text) == 0))
		abort();
	free(text);
}

/* An image of the manifest and the files of set (1: a, 2: b) on a memfd. */
static int
image(struct gck_ctx *ctx, const struct file *f, const int *in, size_t n,
    int set)
{
	struct gck_writer	*w = NULL;
	char			 name[64];
	int			 fd, seen = 0, r;
	size_t			 i;

	if ((fd = memfd_create("image", MFD_CLOEXEC)) == -1)
		abort();
	if (gck_writer_new2(ctx, fd, 0, 4096, 1, 0, &w) != GCK_OK ||
	    gck_writer_add(w, "gpuckpt.json", manifest, strlen(manifest)) !=
	    GCK_OK)
		abort();
	/* A name twice makes a bad image: the first one counts. */
	for (i = 0; i < n; i++) {
		if (!(in[i] & set) || seen & 1 << f[i].name)
			continue;
		seen |= 1 << f[i].name;
		snprintf(name, sizeof name, "criu/%s", names[f[i].name]);
		/* Pages as gpuckpt writes them: zero pages as holes. */
		if (strncmp(names[f[i].name], "pages-", 6) == 0)
			r = gck_writer_add_pages(w, name, f[i].data, f[i].len);
		else
			r = gck_writer_add(w, name, f[i].data, f[i].len);
		if (r != GCK_OK)
			abort();
	}
	if (gck_writer_finish(w) != GCK_OK)
		abort();
	gck_writer_free(w);
	if (lseek(fd, 0, SEEK_SET) != 0)
		abort();
	return fd;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct file	 f[16];
	struct gck_ctx	*ctx;
	const struct file *pm = NULL, *pg = NULL;
	char		*text = NULL;
	size_t		 i, n;
	int		 in[16], fa, fb, differ, r;

	if ((ctx = gck_ctx_new()) == NULL)
		abort();
	n = split(data, size, f, in, 16);
	for (i = 0; i < n; i++) {
		if (!(in[i] & 1))
			continue;
		if (f[i].name == 0 && pm == NULL)
			pm = &f[i];
		if (f[i].name == 1 && pg == NULL)
			pg = &f[i];
	}
	if (pm != NULL && pg != NULL)
		pmread(ctx, pm, pg);
	fa = image(ctx, f, in, n, 1);
	fb = image(ctx, f, in, n, 2);
	r = gck_inspect_diff(ctx, fa, "a", fb, "b", &text, &differ);
	fuzz_say("diff", r, r == GCK_OK ? text : gck_error_string(ctx));
	if (r == GCK_OK && (text == NULL || strlen(text) == 0))
		abort();
	free(text);
	inspect(ctx, fa);
	restore_check(ctx, f, in, n);
	close(fa);
	close(fb);
	gck_ctx_free(ctx);
	return 0;
}
