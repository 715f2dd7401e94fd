/*
 * fuzz_fill: the bytes are an image file, read as gpurestore FILE reads
 * one to plan writing its processes' memory in place (criu/fill.c): its
 * head and every CRIU file before the memory, checked and kept; its own
 * trailer, found from its footer; then the plan over them (the threads'
 * core images, the mappings of mm-PID.img, each pagemap against the
 * trailer's chunks), and the chunks read ahead by the trailer's offsets
 * that criu would be given.
 *
 * Under libFuzzer a failed malloc() ends the run, so no input may come
 * back as GCK_ENOMEM: that would be a damaged image taken for a lack of
 * memory.
 */
#include "config.h"

#include <fcntl.h>

#include "private.h"
#include "criu/fill.h"
#include "criu/streamer.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/parent.h"
#include "fuzz.h"

#define KEPT_MAX	64		/* files kept, at most */
#define KEEP_MAX	(4u << 20)	/* bytes of each, at most */

static int	keep_head(struct gck_ctx *, struct gck_reader *,
		    const struct gck_manifest *, struct gck_sfile *, size_t *);
static int	plan(struct gck_ctx *, int);
static void	check(const char *, int, struct gck_ctx *);

/*
 * The files before the first of the memory, into kept[] (*np of them).
 * Returns GCK_OK or a code.
 */
static int
keep_head(struct gck_ctx *ctx, struct gck_reader *rd,
    const struct gck_manifest *m, struct gck_sfile *kept, size_t *np)
{
	struct gck_sfile	*f;
	char			 name[GCK_NAME_MAX + 1];
	uint64_t		 size;
	size_t			 cap;
	ssize_t			 n;
	int			 r;

	while ((r = gck_reader_file(rd, name, sizeof name, &size)) == 0) {
		if (gck_manifest_file_memory(m, name) || *np == KEPT_MAX)
			break;
		f = &kept[(*np)++];
		memset(f, 0, sizeof *f);
		f->fd = -1;
		snprintf(f->name, sizeof f->name, "%s", name);
		cap = size < KEEP_MAX ? (size_t)size : KEEP_MAX;
		if ((f->data = malloc(cap + 1)) == NULL)
			abort();
		while ((n = gck_reader_file_read(rd, f->data + f->len,
		    cap + 1 - f->len)) > 0 && f->len + (size_t)n <= cap)
			f->len += (size_t)n;
		if (n < 0)
			return ctx->code;
	}
	return r < 0 ? r : GCK_OK;
}

/* The plan of the image on fd.  Returns GCK_OK or a code. */
static int
plan(struct gck_ctx *ctx, int fd)
{
	const struct gck_manifest *m;
	struct gck_reader	*rd = NULL;
	struct gck_parents	*self = NULL;
	struct gck_fill		*f = NULL;
	struct gck_sfile	 kept[KEPT_MAX];
	const char		*pmname, *pgname;
	char			*pm, *pg;
	size_t			 nkept = 0, pmlen, pglen, i;
	int			 r;

	if ((r = gck_reader_new(ctx, fd, &rd)) != GCK_OK)
		goto out;
	gck_reader_set_threads(rd, 1);
	if ((r = gck_reader_head(rd, &m)) != GCK_OK ||
	    (r = keep_head(ctx, rd, m, kept, &nkept)) != GCK_OK)
		goto out;
	if ((r = gck_parents_self(ctx, fd, "fuzz", &self)) != GCK_OK ||
	    (r = gck_fill_plan(ctx, m, self, NULL, kept, nkept, &f)) != GCK_OK ||
	    f == NULL)
		goto out;
	for (i = 0; i < gck_fill_nfiles(f); i++) {
		gck_fill_file(f, i, &pmname, &pm, &pmlen, &pgname, &pg,
		    &pglen);
		free(pm);
		free(pg);
	}
out:
	gck_fill_free(f);
	gck_parents_free(self);
	gck_reader_free(rd);
	for (i = 0; i < nkept; i++)
		free(kept[i].data);
	return r;
}

/* Says how the input fared; aborts on a code it cannot have earned. */
static void
check(const char *what, int r, struct gck_ctx *ctx)
{
	fuzz_say(what, r, gck_error_string(ctx));
	if (r == GCK_ENOMEM) {
		fprintf(stderr, "fuzz_fill: %s: out of memory, said of a "
		    "damaged image: %s\n", what, gck_error_string(ctx));
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gck_ctx	*ctx;
	int		 fd, r;

	if ((ctx = gck_ctx_new()) == NULL)
		abort();
	fd = fuzz_memfd(data, size);
	r = plan(ctx, fd);
	check("plan", r, ctx);
	close(fd);
	gck_ctx_free(ctx);
	return 0;
}
