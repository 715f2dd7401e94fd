/*
 * chunker.c: the cut of a process's page data into chunks.
 *
 * A chunk ends after a page whose contents say so, or when it reaches
 * GCK_CHUNK_SIZE bytes; the writer also ends one where a mapping of the
 * process starts (checkpoint.c), so that none holds pages of two.  A
 * page says so when the XXH3-64 hash of its samples, the first 32 bytes
 * of each 512, is 0 modulo GCK_CHUNK_CUTS, unless they are all zeros or
 * the same as the page before it (a run of like pages would be cut
 * after each page, or never).  Samples, not the whole page, as this is
 * done to every page of a checkpoint, in the stop of a migration too,
 * where hashing whole pages cost 0.15 s a GiB on one CPU; pages alike
 * where sampled are only cut less often.
 *
 * So the same pages make the same chunks wherever they lie: memory that
 * moved to other addresses, as a GPU driver's staging memory does from
 * one checkpoint to the next, or that has other pages before it, is cut
 * as before from the start of its mapping, or from the first page that
 * says so, and its chunks are found again by their digests.  Chunks of
 * random bytes hold about 440 KiB on average; memory rewritten in place
 * costs about 1.9 times its bytes, as the chunks at its edges change too.
 *
 * The rule is only the writer's: a reader takes chunks of any size up
 * to GCK_CHUNK_SIZE, however they were cut.
 */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include <xxhash.h>

#include "private.h"
#include "image/chunker.h"

static pthread_once_t	zero_once = PTHREAD_ONCE_INIT;
static uint64_t		zero_h;		/* the hash of a page of zeros */

#define SAMPLE_LEN	32u
#define SAMPLE_STRIDE	512u
#define SAMPLES		(GCK_CHUNK_PAGE / SAMPLE_STRIDE * SAMPLE_LEN)

/* The hash of the samples of the page at p. */
static uint64_t
page_hash(const char *p)
{
	char	s[SAMPLES];
	size_t	i;

	for (i = 0; i < GCK_CHUNK_PAGE / SAMPLE_STRIDE; i++)
		memcpy(s + i * SAMPLE_LEN, p + i * SAMPLE_STRIDE, SAMPLE_LEN);
	return XXH3_64bits(s, sizeof s);
}

static void
zero_init(void)
{
	static const char	zeros[GCK_CHUNK_PAGE];

	zero_h = page_hash(zeros);
}

static uint64_t
zero_hash(void)
{
	pthread_once(&zero_once, zero_init);
	return zero_h;
}

/* Starts a stream of pages: no page before the first. */
void
gck_chunker_start(struct gck_chunker *c)
{
	c->prev = zero_hash();
	c->len = 0;
}

/*
 * Scans the next len bytes of the stream, buf, whole pages that follow
 * those scanned before.  Returns the bytes of buf up to the end of the
 * chunk, which the next scan starts afresh, or 0 if the chunk goes on
 * beyond them.
 */
size_t
gck_chunker_scan(struct gck_chunker *c, const char *buf, size_t len)
{
	uint64_t	h, z = zero_hash();
	size_t		off;
	int		cut;

	for (off = 0; off + GCK_CHUNK_PAGE <= len; ) {
		h = page_hash(buf + off);
		off += GCK_CHUNK_PAGE;
		c->len += GCK_CHUNK_PAGE;
		cut = c->len >= GCK_CHUNK_SIZE ||
		    (h % GCK_CHUNK_CUTS == 0 && h != z && h != c->prev);
		c->prev = h;
		if (cut) {
			c->len = 0;
			return off;
		}
	}
	return 0;
}
