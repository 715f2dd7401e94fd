/*
 * fuzz_parent: the bytes are the parent image of an incremental image,
 * read as gpurestore --parent and gpuinspect --verify --parent read
 * one: its footer, the trailer frame the footer names, its manifest
 * through the trailer, then each chunk the child refers to, fetched
 * from the frame the trailer says, as the reader extracts the child
 * into a directory that is emptied after each input.  The same bytes
 * also go through what gpuckpt --parent reads of its parent (the
 * digests it lists), what gpuinspect says of an image's sizes, and what
 * gpurestore --allowed-signers reads first of an image, from its end:
 * the trailer and the signature after it, and who signed (nothing is
 * verified: that is ssh-keygen's).
 *
 * Under libFuzzer a failed malloc() ends the run, so no input may come
 * back as GCK_ENOMEM: that would be a damaged image taken for a lack of
 * memory.
 *
 * The child is child.gck beside this file: a real image that gpuckpt
 * --parent took over corpus/parent/zstd.gck, its parent (mkcorpus.py
 * makes both).  The parent is handed to the library as
 * /proc/self/fd/N of a memfd, since a parent is named by its path.
 */
#include "config.h"

#include <fcntl.h>

#include <jansson.h>
#include "private.h"
#include "image/digest.h"
#include "image/parent.h"
#include "image/sign.h"
#include "fuzz.h"

#ifndef FUZZ_DATADIR
#define FUZZ_DATADIR	"tests/fuzz"
#endif

static char	*dir;
static int	 dfd = -1;
static char	*child;
static size_t	 childlen;

static void	cleanup(void);
static void	load_child(void);
static int	as_base(struct gck_ctx *, const char *);
static int	as_parent(struct gck_ctx *, char *);
static int	as_signed(struct gck_ctx *, int, const char *);
static void	check(const char *, int, struct gck_ctx *);

static void
cleanup(void)
{
	if (dir != NULL)
		fuzz_rmdir(dir);
	free(child);
}

/* Reads the child image once; aborts if it cannot. */
static void
load_child(void)
{
	const char	*path = FUZZ_DATADIR "/child.gck";
	size_t		 cap = 0;
	ssize_t		 n;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		fprintf(stderr, "fuzz_parent: cannot open %s\n", path);
		abort();
	}
	for (;;) {
		if (childlen == cap && (child = realloc(child,
		    cap = cap * 2 + 65536)) == NULL)
			abort();
		if ((n = read(fd, child + childlen, cap - childlen)) < 0)
			abort();
		if (n == 0)
			break;
		childlen += (size_t)n;
	}
	close(fd);
}

/* The parent as gpuckpt --parent reads it: the digests it lists. */
static int
as_base(struct gck_ctx *ctx, const char *path)
{
	struct gck_parents	*ps = NULL;
	struct gck_digest	 d;
	json_t			*j;
	int			 r;

	if ((r = gck_parents_new(ctx, &ps)) == GCK_OK &&
	    (r = gck_parents_base(ps, path)) == GCK_OK) {
		memset(&d, 0, sizeof d);
		d.kind = GCK_DK_SHA256;
		(void)gck_parents_has(ps, &d);
		if ((j = gck_parents_json(ps)) == NULL)
			abort();
		json_decref(j);
	}
	gck_parents_free(ps);
	return r;
}

/* The child read over the parent at path, extracted into dir. */
static int
as_parent(struct gck_ctx *ctx, char *path)
{
	const struct gck_manifest	*m;
	struct gck_reader		*rd = NULL;
	int				 fd, r;

	fd = fuzz_memfd(child, childlen);
	if ((r = gck_reader_new(ctx, fd, &rd)) == GCK_OK &&
	    (r = gck_reader_head(rd, &m)) == GCK_OK &&
	    (r = gck_reader_use_parents(rd, &path, 1)) == GCK_OK)
		r = gck_reader_extract(rd, dfd);
	gck_reader_free(rd);
	close(fd);
	fuzz_empty(dir);
	return r;
}

/* The end of the image, as gpurestore --allowed-signers reads it. */
static int
as_signed(struct gck_ctx *ctx, int fd, const char *path)
{
	struct gck_sigkey	 k;
	char			*t = NULL, *sig = NULL;
	size_t			 tlen = 0, siglen = 0;
	int			 r;

	r = gck_image_tail(ctx, fd, path, &t, &tlen, &sig, &siglen);
	if (r != GCK_OK) {
		if (t != NULL || sig != NULL)
			abort();
		return r;
	}
	if (t == NULL || t[tlen] != '\0' || (sig != NULL &&
	    (siglen > GCK_SIG_MAX || sig[siglen] != '\0')))
		abort();
	/* who signed: a code for no SSHSIG, never GCK_ENOMEM (check()) */
	if (sig != NULL)
		r = gck_sig_key(ctx, sig, siglen, &k);
	free(t);
	free(sig);
	return r;
}

/* Says how the input fared; aborts on a code it cannot have earned. */
static void
check(const char *what, int r, struct gck_ctx *ctx)
{
	fuzz_say(what, r, gck_error_string(ctx));
	if (r == GCK_ENOMEM) {
		fprintf(stderr, "fuzz_parent: %s: out of memory, said of a "
		    "damaged image: %s\n", what, gck_error_string(ctx));
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gck_ctx	*ctx;
	char		 path[64];
	uint64_t	 stored, ref;
	int		 fd, r;

	if (dir == NULL) {
		load_child();
		dir = fuzz_tmpdir("parent");
		atexit(cleanup);
		if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
			abort();
	}
	if ((ctx = gck_ctx_new()) == NULL)
		abort();
	fd = fuzz_memfd(data, size);
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);

	r = gck_parents_sizes(ctx, fd, path, &stored, &ref);
	check("sizes", r, ctx);
	r = as_base(ctx, path);
	check("base", r, ctx);
	r = as_parent(ctx, path);
	check("parent", r, ctx);
	r = as_signed(ctx, fd, path);
	check("signed", r, ctx);

	close(fd);
	gck_ctx_free(ctx);
	return 0;
}
