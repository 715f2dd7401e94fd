/*
 * snapshot.c: the two halves of a snapshot (gpuckpt -R) that run while
 * the tree runs, so that it is stopped only for what must be consistent.
 *
 * Before the stop, gck_snap_rounds() reads the running tree's memory
 * into images of chunks in the work directory (precopy.c), each round
 * only what changed since the last, as gpusend --live sends them.  The
 * checkpoint then writes, with the tree stopped, an image that refers
 * to those chunks rather than store them, and to the chunks of the
 * image named as parent: what it stores is the chunks that changed
 * since the last round, the CRIU files, and the memory the GPUs staged.
 * Once the tree runs again, gck_snap_write() writes the image asked
 * for: what that image refers to read back from the rounds, compressed
 * as asked, signed if asked; given a parent, only the pages the parent
 * lacks, as the digests of the pages find them.
 *
 * Every byte of the image written is what the stopped tree held: a
 * chunk is only ever taken for the digest the stopped tree's memory
 * gave, as an image refers to its parent's.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/parent.h"
#include "ops/ops.h"

/*
 * The rounds end when the last one wrote at most 1/SMALL of the memory
 * it read, when one no longer halves what the one before wrote, or
 * after ROUNDS of them.
 */
#define ROUNDS		4
#define SMALL		8

/*
 * One round: the memory the pool lacks, into work/round-K.img, which
 * then joins the pool.  Returns GCK_OK or a code.
 */
static int
snap_round(struct gck_ctx *ctx, pid_t pid, const char *work, unsigned k,
    struct gck_parents *pool, struct gck_memo *memo,
    struct gck_precopy_stats *st)
{
	char	path[PATH_MAX];
	int	fd, r;

	if ((size_t)snprintf(path, sizeof path, "%s/round-%u.img", work, k) >=
	    sizeof path)
		return gck_set_error(ctx, GCK_EINVAL, "work directory '%s': "
		    "name too long", work);
	if ((fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) ==
	    -1)
		return gck_set_syserr(ctx, errno, "cannot create '%s': %s",
		    path, strerror(errno));
	r = gck_precopy(ctx, pid, GCK_SNAP_LEVEL, fd, pool, memo, NULL, st);
	if (r == GCK_OK && fsync(fd) == -1 && errno != EINVAL)
		r = gck_set_syserr(ctx, errno, "cannot write '%s': %s", path,
		    strerror(errno));
	close(fd);
	if (r != GCK_OK)
		return r;
	if ((r = gck_parents_pool_add(pool, path)) != GCK_OK)
		return r;
	gck_parents_pool_done(pool);
	return gck_parents_pool_offer(pool);
}

int
gck_snap_rounds(struct gck_ctx *ctx, pid_t pid, const char *work,
    const char *parent, struct gck_memo *memo, struct gck_parents **poolp)
{
	struct gck_precopy_stats st;
	struct gck_parents	*pool = NULL;
	int64_t			 t0;
	const char		*why = "the last round";
	uint64_t		 prev = 0;
	unsigned		 k;
	int			 r;

	*poolp = NULL;
	if ((r = gck_parents_new(ctx, &pool)) != GCK_OK)
		return r;
	/* What the parent stores need not be read again either. */
	if (parent != NULL) {
		if ((r = gck_parents_pool_parent(pool, parent)) != GCK_OK)
			goto out;
		gck_parents_pool_done(pool);
		if ((r = gck_parents_pool_offer(pool)) != GCK_OK)
			goto out;
	}
	for (k = 1; k <= ROUNDS; k++) {
		t0 = gck_clock_us();
		if ((r = snap_round(ctx, pid, work, k, pool, memo, &st)) !=
		    GCK_OK)
			goto out;
		gck_log(ctx, 1, "round %u: %" PRIu64 " bytes of memory read, "
		    "%" PRIu64 " of them new, in %.2f s", k, st.memory,
		    st.stored, (double)(gck_clock_us() - t0) / 1e6);
		if (st.stored <= st.memory / SMALL) {
			why = "little memory changed";
			break;
		}
		if (k > 1 && st.stored * 2 > prev) {
			why = "rounds no longer shrink";
			break;
		}
		prev = st.stored;
	}
	gck_log(ctx, 1, "pre-copy ended after %u round%s: %s", k > ROUNDS ?
	    ROUNDS : k, k == 1 ? "" : "s", why);
	*poolp = pool;
	pool = NULL;
out:
	gck_parents_free(pool);
	return r;
}

int
gck_snap_write(struct gck_ctx *ctx, int delta, struct gck_parents *pool,
    struct gck_memo *memo, const struct gck_ckpt_opts *o,
    const struct gck_parents *parents, int outfd, uint64_t *imagep,
    uint64_t *refbytesp)
{
	const struct gck_manifest	*m;
	struct gck_reader		*rd = NULL;
	struct gck_writer		*w = NULL;
	uint64_t			 memory, read, planned;
	int				 r;

	*imagep = *refbytesp = 0;
	if (lseek(delta, 0, SEEK_SET) == -1)
		return gck_set_syserr(ctx, errno, "cannot read the image "
		    "made stopped: %s", strerror(errno));
	if ((r = gck_reader_new(ctx, delta, &rd)) != GCK_OK)
		goto out;
	/*
	 * Given a parent, of the chunks the rounds hold only the pages the
	 * parent lacks are read (gck_reader_copy()): none is read ahead.
	 */
	if (parents != NULL)
		gck_reader_no_fetch(rd);
	if ((r = gck_reader_head(rd, &m)) != GCK_OK)
		goto out;
	if (gck_manifest_cached(m)) {
		if ((r = gck_parents_pool_check(pool, m)) != GCK_OK)
			goto out;
		gck_reader_set_parents(rd, pool);
	}
	if ((r = gck_writer_new2(ctx, outfd, o->level, o->part_size,
	    o->format > 1 ? o->format : GCK_FORMAT_VERSION, o->threads, &w)) !=
	    GCK_OK)
		goto out;
	gck_writer_set_parents(w, parents);
	/*
	 * The SHA-256 of a chunk the rounds read is in their memo: it is
	 * not computed again (the chunk itself is checked against its
	 * digest as it is read back).
	 */
	gck_writer_set_memo(w, memo);
	if ((r = gck_writer_set_sign(w, o->sign)) != GCK_OK ||
	    (r = gck_reader_copy(rd, w)) != GCK_OK)
		goto out;
	*refbytesp = gck_writer_refbytes(w);
	gck_writer_counts(w, &memory, imagep);
	gck_reader_copy_stats(rd, &read, &planned);
	gck_log(ctx, 1, "image: of %" PRIu64 " bytes of memory, %" PRIu64
	    " read back from the rounds; %" PRIu64 " written from the "
	    "digests of their pages", memory, read, planned);
out:
	gck_writer_free(w);
	gck_reader_free(rd);
	return r;
}
