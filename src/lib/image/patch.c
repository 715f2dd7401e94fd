/*
 * patch.c: an image's memory page by page (format 3, gpuckpt-image(5),
 * "Page index" and "Patches").
 *
 * A chunk rewritten in a page or two is not new: most of its pages are
 * those of a chunk an earlier image holds, at the same place or
 * elsewhere.  Each page's XXH3-128 digest, which every image of format
 * 3 lists in its page index, finds them without reading that image's
 * data: a writer given the indexes of the images it may refer to (a
 * parent, the rounds of a pre-copy) looks up each page of a chunk, and
 * writes the chunk as a patch, runs of their chunks' pages with the
 * pages it lacks, when they hold enough of it.
 *
 * The digest only finds pages; it proves nothing.  A patch's own digest
 * (SHA-256) covers the pages it stores, its map and its size; each base
 * it names is checked against its own digest as it is read; so every
 * byte a restore uses is covered by a digest of the trailer, as before.
 * XXH3-128 rather than 64 bits, as pages are looked up by content
 * among millions: a false match would make an image that no restore
 * takes.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "private.h"
#include "image/patch.h"

static pthread_once_t	 zero_once = PTHREAD_ONCE_INIT;
static unsigned char	 zero_dig[GCK_PDIG];

/* The digest of the page at p, GCK_PAGE bytes, into out. */
void
gck_page_digest(const void *p, unsigned char *out)
{
	XXH128_canonical_t	c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(p, GCK_PAGE));
	memcpy(out, c.digest, GCK_PDIG);
}

static void
zero_init(void)
{
	static const char	zeros[GCK_PAGE];

	gck_page_digest(zeros, zero_dig);
}

/* The digest of a page of zeros. */
const unsigned char *
gck_page_zero_digest(void)
{
	pthread_once(&zero_once, zero_init);
	return zero_dig;
}

void
gck_ptab_init(struct gck_ptab *t)
{
	memset(t, 0, sizeof *t);
}

void
gck_ptab_clear(struct gck_ptab *t)
{
	free(t->dig);
	free(t->ent);
	free(t->slot);
	free(t->byd);
	free(t->seq);
	gck_ptab_init(t);
}

/*
 * Adds a chunk that may be named as a base: its digest d, its size and
 * the digests of its pages, size / GCK_PAGE of them.  Returns GCK_OK or
 * GCK_ENOMEM.
 */
int
gck_ptab_add(struct gck_ptab *t, const struct gck_digest *d, uint64_t size,
    const unsigned char *pdig)
{
	uint64_t	 n = size / GCK_PAGE, nc;
	unsigned char	*nd;
	struct gck_pbase *ne;

	if (t->npages + n > UINT32_MAX - 1)
		return GCK_ENOMEM;
	if (t->npages + n > t->cappages) {
		nc = t->cappages ? t->cappages : 4096;
		while (nc < t->npages + n)
			nc *= 2;
		if ((nd = realloc(t->dig, (size_t)nc * GCK_PDIG)) == NULL)
			return GCK_ENOMEM;
		t->dig = nd;
		t->cappages = nc;
	}
	if (t->nent == t->capent) {
		nc = t->capent ? t->capent * 2 : 256;
		if ((ne = reallocarray(t->ent, (size_t)nc, sizeof *ne)) ==
		    NULL)
			return GCK_ENOMEM;
		t->ent = ne;
		t->capent = (size_t)nc;
	}
	t->ent[t->nent].d = *d;
	t->ent[t->nent].size = size;
	t->ent[t->nent].first = t->npages;
	t->nent++;
	memcpy(t->dig + t->npages * GCK_PDIG, pdig, (size_t)n * GCK_PDIG);
	t->npages += n;
	return GCK_OK;
}

static uint64_t
slot_of(const unsigned char *dig)
{
	uint64_t	h;

	memcpy(&h, dig, sizeof h);
	return h;
}

/*
 * Once every chunk is added: the table of pages by digest, zero pages
 * left out (they need no base), each digest once.  Returns GCK_OK or
 * GCK_ENOMEM.
 */
static int
seq_cmp(const void *a, const void *b)
{
	const struct gck_pseq	*sa = a, *sb = b;

	return sa->h < sb->h ? -1 : sa->h > sb->h;
}

/*
 * The chunk of t whose pages are those of digests pd (n of them), all
 * of them in their order, or SIZE_MAX: the same bytes, to be referred
 * to by their digest, which any image that stores them gives.
 */
static size_t
ptab_same(const struct gck_ptab *t, const unsigned char *pd, size_t n)
{
	uint64_t	h;
	size_t		lo = 0, hi, mid;

	if (t->seq == NULL)
		return SIZE_MAX;
	h = XXH3_64bits(pd, n * GCK_PDIG);
	hi = t->nent;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (t->seq[mid].h < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < t->nent && t->seq[lo].h == h; lo++)
		if (t->ent[t->seq[lo].ent].size == (uint64_t)n * GCK_PAGE &&
		    memcmp(t->dig + t->ent[t->seq[lo].ent].first * GCK_PDIG, pd,
		    n * GCK_PDIG) == 0)
			return t->seq[lo].ent;
	return SIZE_MAX;
}

static int
byd_cmp(const void *a, const void *b, void *arg)
{
	const struct gck_pbase	*ea = &((const struct gck_pbase *)arg)[
				    *(const size_t *)a];
	const struct gck_pbase	*eb = &((const struct gck_pbase *)arg)[
				    *(const size_t *)b];
	int			 c;

	if ((c = memcmp(ea->d.b, eb->d.b, GCK_DIGEST_MAX)) != 0)
		return c;
	return ea->size < eb->size ? -1 : ea->size > eb->size;
}

int
gck_ptab_build(struct gck_ptab *t)
{
	const unsigned char	*z = gck_page_zero_digest();
	uint64_t		 size = 16, i, s;
	uint32_t		 v;

	free(t->slot);
	free(t->byd);
	free(t->seq);
	t->slot = NULL;
	t->byd = NULL;
	t->seq = NULL;
	t->mask = 0;
	if (t->npages == 0)
		return GCK_OK;
	if ((t->byd = reallocarray(NULL, t->nent, sizeof *t->byd)) == NULL ||
	    (t->seq = reallocarray(NULL, t->nent, sizeof *t->seq)) == NULL)
		return GCK_ENOMEM;
	for (i = 0; i < t->nent; i++) {
		t->byd[i] = (size_t)i;
		t->seq[i].h = XXH3_64bits(t->dig + t->ent[i].first * GCK_PDIG,
		    (size_t)(t->ent[i].size / GCK_PAGE) * GCK_PDIG);
		t->seq[i].ent = (size_t)i;
	}
	qsort_r(t->byd, t->nent, sizeof *t->byd, byd_cmp, t->ent);
	qsort(t->seq, t->nent, sizeof *t->seq, seq_cmp);
	while (size < t->npages + t->npages / 2)
		size *= 2;
	if ((t->slot = calloc((size_t)size, sizeof *t->slot)) == NULL)
		return GCK_ENOMEM;
	t->mask = size - 1;
	for (i = 0; i < t->npages; i++) {
		if (memcmp(t->dig + i * GCK_PDIG, z, GCK_PDIG) == 0)
			continue;
		for (s = slot_of(t->dig + i * GCK_PDIG) & t->mask;
		    (v = t->slot[s]) != 0; s = (s + 1) & t->mask)
			if (memcmp(t->dig + (uint64_t)(v - 1) * GCK_PDIG,
			    t->dig + i * GCK_PDIG, GCK_PDIG) == 0)
				break;
		if (v == 0)
			t->slot[s] = (uint32_t)(i + 1);
	}
	return GCK_OK;
}

/*
 * Where a page of digest dig is: its chunk, *entp, and its page there,
 * *pagep.  Returns 0, or -1 if no chunk of the table holds it.
 */
int
gck_ptab_find(const struct gck_ptab *t, const unsigned char *dig,
    size_t *entp, uint32_t *pagep)
{
	uint64_t	s, g;
	uint32_t	v;
	size_t		lo, hi, mid;

	if (t->slot == NULL)
		return -1;
	for (s = slot_of(dig) & t->mask; (v = t->slot[s]) != 0;
	    s = (s + 1) & t->mask)
		if (memcmp(t->dig + (uint64_t)(v - 1) * GCK_PDIG, dig,
		    GCK_PDIG) == 0)
			break;
	if (v == 0)
		return -1;
	g = v - 1;
	/* the chunk whose pages start at or before it, last of them */
	lo = 0;
	hi = t->nent;
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (t->ent[mid].first <= g)
			lo = mid;
		else
			hi = mid;
	}
	*entp = lo;
	*pagep = (uint32_t)(g - t->ent[lo].first);
	return 0;
}

/*
 * The digests of the pages of the chunk whose digest is d and size
 * size, as the table lists them (size / GCK_PAGE of them), or NULL if
 * it has no such chunk.
 */
const unsigned char *
gck_ptab_pages(const struct gck_ptab *t, const struct gck_digest *d,
    uint64_t size)
{
	const struct gck_pbase	*e;
	size_t			 lo = 0, hi, mid;
	int			 c;

	if (t->byd == NULL)
		return NULL;
	hi = t->nent;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		e = &t->ent[t->byd[mid]];
		if ((c = memcmp(e->d.b, d->b, GCK_DIGEST_MAX)) == 0)
			c = e->size < size ? -1 : e->size > size;
		if (c == 0)
			return t->dig + e->first * GCK_PDIG;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * A chunk is a base of a patch only if it gives at least so many of its
 * pages, or a quarter of them.
 */
#define PLAN_BASE_MIN	8

/* The chunks tried as the one a chunk is a patch of, at most. */
#define PLAN_TRY	4

static int
tried(size_t e, const size_t *try, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (try[i] == e)
			return 1;
	return 0;
}

/* Appends a run to p, joined to the one before where it goes on. */
static void
plan_run(struct gck_patch *p, int kind, uint32_t base, uint32_t page)
{
	struct gck_prun	*q = p->nrun > 0 ? &p->run[p->nrun - 1] : NULL;

	if (q != NULL && q->kind == kind && (kind != GCK_RUN_BASE ||
	    (q->base == base && q->page + q->count == page))) {
		q->count++;
		return;
	}
	q = &p->run[p->nrun++];
	q->kind = kind;
	q->count = 1;
	q->base = base;
	q->page = page;
}

/* Where the pages of a chunk are found, and how many each chunk gives. */
struct pfound {
	size_t		 fe[GCK_PATCH_RUNS];	/* page i's chunk, or SIZE_MAX */
	uint32_t	 fp[GCK_PATCH_RUNS];	/* and its page there */
	size_t		 fent[GCK_PATCH_RUNS];	/* the chunks found, */
	size_t		 fcount[GCK_PATCH_RUNS];	/* the pages of each */
	size_t		 nf;
};

/* Counts the pages of each chunk found, from f->fe (n pages). */
static void
plan_count(struct pfound *f, size_t n)
{
	size_t	i, b;

	for (i = 0, f->nf = 0; i < n; i++) {
		if (f->fe[i] == SIZE_MAX)
			continue;
		for (b = 0; b < f->nf && f->fent[b] != f->fe[i]; b++)
			;
		if (b == f->nf) {
			f->fent[f->nf] = f->fe[i];
			f->fcount[f->nf++] = 0;
		}
		f->fcount[b]++;
	}
}

/* Whether page i of pd is page i + d of chunk e of t. */
static int
plan_aligned(const struct gck_ptab *t, const unsigned char *pd, size_t i,
    size_t e, int64_t d)
{
	int64_t	at = (int64_t)i + d;

	return at >= 0 && at < (int64_t)(t->ent[e].size / GCK_PAGE) &&
	    memcmp(pd + i * GCK_PDIG, t->dig + (t->ent[e].first +
	    (uint64_t)at) * GCK_PDIG, GCK_PDIG) == 0;
}

/*
 * The chunk found that holds most of the n pages pd in their order,
 * into *bestp (SIZE_MAX: none), with the offset of its pages, *dp, and
 * how many it holds, *np: of those that hold at least two, the PLAN_TRY
 * that hold most.
 */
static void
plan_best(const struct gck_ptab *t, const unsigned char *pd, size_t n,
    const struct pfound *f, size_t *bestp, int64_t *dp, size_t *np)
{
	size_t	try[PLAN_TRY], ntry, k, b, c, i, m;
	int64_t	d;

	*bestp = SIZE_MAX;
	*dp = 0;
	*np = 0;
	for (k = 0, ntry = 0; k < PLAN_TRY; k++) {
		for (b = 0, c = SIZE_MAX; b < f->nf; b++)
			if (f->fcount[b] >= 2 && (c == SIZE_MAX ||
			    f->fcount[b] > f->fcount[c]) &&
			    !tried(f->fent[b], try, ntry))
				c = b;
		if (c == SIZE_MAX)
			break;
		try[ntry++] = f->fent[c];
	}
	for (k = 0; k < ntry; k++) {
		for (i = 0; f->fe[i] != try[k]; i++)
			;
		d = (int64_t)f->fp[i] - (int64_t)i;
		for (i = 0, m = 0; i < n; i++)
			m += (size_t)plan_aligned(t, pd, i, try[k], d);
		if (m > *np) {
			*np = m;
			*bestp = try[k];
			*dp = d;
		}
	}
}

/*
 * The runs of patch p from where f found each of the n pages: a chunk
 * that gives only a few of them is no base.  Returns whether they are
 * all those of one chunk, in their order, in *fromp.
 */
static int
plan_runs(const struct gck_ptab *t, const unsigned char *zero, size_t n,
    const struct pfound *f, struct gck_patch *p, size_t *fromp)
{
	uint64_t	 used[GCK_PATCH_BASES][GCK_PATCH_RUNS / 64];
	size_t		 ent[GCK_PATCH_BASES], e, i, b;
	uint32_t	 page;
	int		 all = 1;

	memset(used, 0, sizeof used);
	*fromp = 0;
	for (i = 0; i < n; i++) {
		if (zero[i]) {
			plan_run(p, GCK_RUN_ZERO, 0, 0);
			all = 0;
			continue;
		}
		for (b = 0; f->fe[i] != SIZE_MAX && f->fent[b] != f->fe[i];
		    b++)
			;
		if (f->fe[i] == SIZE_MAX || (f->fcount[b] < PLAN_BASE_MIN &&
		    f->fcount[b] * 4 < n)) {
			plan_run(p, GCK_RUN_STORED, 0, 0);
			p->stored += GCK_PAGE;
			all = 0;
			continue;
		}
		e = f->fe[i];
		page = f->fp[i];
		for (b = 0; b < p->nbase && ent[b] != e; b++)
			;
		if (b == p->nbase && p->nbase < GCK_PATCH_BASES) {
			ent[p->nbase] = e;
			p->base[p->nbase] = t->ent[e].d;
			p->bsize[p->nbase++] = t->ent[e].size;
		}
		if (b == p->nbase || (used[b][page / 64] >> (page % 64)) & 1) {
			plan_run(p, GCK_RUN_STORED, 0, 0);
			p->stored += GCK_PAGE;
			all = 0;
			continue;
		}
		used[b][page / 64] |= 1ull << (page % 64);
		if (i == 0)
			*fromp = e;
		if (e != *fromp || page != i)
			all = 0;
		plan_run(p, GCK_RUN_BASE, (uint32_t)b, page);
	}
	return all;
}

/*
 * How to write a chunk of n pages whose digests are pd (n of them) and
 * of which zero[i] says whether page i holds only zeros, given table t:
 * GCK_PLAN_REF, all of it a chunk of t, whose index is in *refp;
 * GCK_PLAN_PATCH, as the patch *p; or GCK_PLAN_FULL, stored whole, as
 * t holds too little of it.  A patch names at most GCK_PATCH_BASES
 * chunks and each of their pages once; it is written when they give at
 * least a quarter of the chunk's pages.
 */
int
gck_patch_plan(const struct gck_ptab *t, const unsigned char *pd,
    const unsigned char *zero, size_t n, struct gck_patch *p, size_t *refp)
{
	struct pfound	*f;
	size_t		 e, i, from, best, bestn;
	int64_t		 bestd;
	int		 all, plan;

	memset(p, 0, sizeof *p);
	if (t->slot == NULL || n == 0 || n > GCK_PATCH_RUNS)
		return GCK_PLAN_FULL;
	p->size = (uint64_t)n * GCK_PAGE;
	if ((e = ptab_same(t, pd, n)) != SIZE_MAX) {
		*refp = e;
		return GCK_PLAN_REF;
	}
	if ((f = malloc(sizeof *f)) == NULL)
		return GCK_PLAN_FULL;
	/*
	 * Where each page is, and how many each chunk found gives: one
	 * that gives only a few (a page whose bytes happen to be found
	 * elsewhere too) is not worth its reading, and they are stored.
	 */
	for (i = 0; i < n; i++)
		if (zero[i] || gck_ptab_find(t, pd + i * GCK_PDIG, &f->fe[i],
		    &f->fp[i]) == -1 || f->fp[i] >= GCK_PATCH_RUNS)
			f->fe[i] = SIZE_MAX;
	plan_count(f, n);
	/*
	 * The chunk found that holds most of its pages in their order (a
	 * chunk of the parent, a few of its pages since rewritten): the
	 * chunk itself if it holds them all, and otherwise each page it
	 * holds is taken from it, where the first chunk found to hold that
	 * page (whose bytes may be elsewhere too) would be another base.
	 */
	plan_best(t, pd, n, f, &best, &bestd, &bestn);
	if (best != SIZE_MAX && bestd == 0 && bestn == n &&
	    t->ent[best].size == p->size) {
		free(f);
		*refp = best;
		return GCK_PLAN_REF;
	}
	if (best != SIZE_MAX) {
		for (i = 0; i < n; i++)
			if (!zero[i] && (int64_t)i + bestd < GCK_PATCH_RUNS &&
			    plan_aligned(t, pd, i, best, bestd)) {
				f->fe[i] = best;
				f->fp[i] = (uint32_t)((int64_t)i + bestd);
			}
		plan_count(f, n);
	}
	all = plan_runs(t, zero, n, f, p, &from);
	free(f);
	if (all && t->ent[from].size == p->size) {
		*refp = from;
		plan = GCK_PLAN_REF;
	} else if (p->nbase == 0 || p->stored > p->size * 3 / 4)
		plan = GCK_PLAN_FULL;
	else
		plan = GCK_PLAN_PATCH;
	return plan;
}

/*
 * The map of patch p, its text as gpuckpt-image(5) gives it, into buf
 * (len bytes).  Returns its length, or -1 if it does not fit.
 */
int
gck_patch_text(const struct gck_patch *p, char *buf, size_t len)
{
	char		 hex[GCK_DIGEST_HEX];
	size_t		 i, off = 0;
	int		 n;

	for (i = 0; i < p->nbase + p->nrun; i++) {
		const struct gck_prun	*q = i < p->nbase ? NULL :
					    &p->run[i - p->nbase];

		if (q == NULL)
			n = snprintf(buf + off, len - off, "base %s %" PRIu64
			    "\n", gck_digest_hex(&p->base[i], hex),
			    p->bsize[i]);
		else if (q->kind == GCK_RUN_BASE)
			n = snprintf(buf + off, len - off, "B %" PRIu32 " %"
			    PRIu32 " %" PRIu32 "\n", q->count, q->base,
			    q->page);
		else
			n = snprintf(buf + off, len - off, "%c %" PRIu32 "\n",
			    q->kind, q->count);
		if (n < 0 || (size_t)n >= len - off)
			return -1;
		off += (size_t)n;
	}
	return (int)off;
}

/* A decimal number of at most 10 digits at *sp, then c. */
static int
p_number(const char **sp, const char *end, int c, uint32_t *vp)
{
	const char	*s = *sp;
	uint64_t	 v = 0;
	int		 nd = 0;

	while (s < end && *s >= '0' && *s <= '9' && nd < 11) {
		v = v * 10 + (uint64_t)(*s++ - '0');
		nd++;
	}
	if (nd == 0 || nd > 10 || v > UINT32_MAX || s >= end || *s != c)
		return -1;
	*vp = (uint32_t)v;
	*sp = s + 1;
	return 0;
}

#define PWHY(...)	do {						\
	snprintf(why, whylen, __VA_ARGS__);				\
	return -1;							\
} while (0)

/*
 * Parses the map of a patch, len bytes of text, for a chunk of size
 * bytes of which the patch stores stored bytes, into *p.  Returns 0, or
 * -1 with why (whylen bytes) saying what is wrong with it: a map that
 * is not in the one form a writer gives it, runs that overlap in a base
 * or run past it, counts that do not add up to the chunk or to what the
 * patch stores, a base named twice or not used.
 */
int
gck_patch_parse(const char *text, size_t len, uint64_t size, uint64_t stored,
    struct gck_patch *p, char *why, size_t whylen)
{
	uint64_t	 used[GCK_PATCH_BASES][GCK_PATCH_RUNS / 64];
	uint64_t	 pages = 0, spages = 0, bpages;
	const char	*s = text, *end = text + len;
	char		 again[GCK_PATCH_MAP_MAX + 1];
	struct gck_prun	*q;
	uint32_t	 v, j;
	size_t		 i, k;
	int		 inuse[GCK_PATCH_BASES];

	memset(p, 0, sizeof *p);
	memset(used, 0, sizeof used);
	memset(inuse, 0, sizeof inuse);
	if (len == 0 || len > GCK_PATCH_MAP_MAX)
		PWHY("a map of %zu bytes", len);
	if (size == 0 || size % GCK_PAGE != 0 || size > GCK_CHUNK_SIZE ||
	    stored % GCK_PAGE != 0 || stored >= size)
		PWHY("a chunk of %" PRIu64 " bytes storing %" PRIu64, size,
		    stored);
	while (s < end && end - s > 5 && memcmp(s, "base ", 5) == 0) {
		if (p->nbase == GCK_PATCH_BASES)
			PWHY("more than %d bases", GCK_PATCH_BASES);
		s += 5;
		if (end - s < GCK_DIGEST_HEX || s[GCK_DIGEST_HEX - 1] != ' ' ||
		    gck_digest_parse(GCK_DK_SHA256, s, GCK_DIGEST_HEX - 1,
		    &p->base[p->nbase]) == -1)
			PWHY("base %zu has no digest", p->nbase + 1);
		s += GCK_DIGEST_HEX;
		if (p_number(&s, end, '\n', &v) == -1 || v == 0 ||
		    v % GCK_PAGE != 0 || v > GCK_CHUNK_SIZE)
			PWHY("base %zu has a bad size", p->nbase + 1);
		p->bsize[p->nbase] = v;
		for (k = 0; k < p->nbase; k++)
			if (gck_digest_equal(&p->base[k], &p->base[p->nbase]))
				PWHY("base %zu named twice", k + 1);
		p->nbase++;
	}
	if (p->nbase == 0)
		PWHY("no base");
	while (s < end) {
		if (p->nrun == GCK_PATCH_RUNS)
			PWHY("more than %d runs", GCK_PATCH_RUNS);
		q = &p->run[p->nrun];
		if (end - s < 2 || s[1] != ' ' || (s[0] != GCK_RUN_BASE &&
		    s[0] != GCK_RUN_STORED && s[0] != GCK_RUN_ZERO))
			PWHY("run %zu unreadable", p->nrun + 1);
		q->kind = s[0];
		s += 2;
		if (q->kind != GCK_RUN_BASE) {
			if (p_number(&s, end, '\n', &q->count) == -1)
				PWHY("run %zu unreadable", p->nrun + 1);
		} else if (p_number(&s, end, ' ', &q->count) == -1 ||
		    p_number(&s, end, ' ', &q->base) == -1 ||
		    p_number(&s, end, '\n', &q->page) == -1)
			PWHY("run %zu unreadable", p->nrun + 1);
		if (q->count == 0 || q->count > GCK_PATCH_RUNS)
			PWHY("run %zu of %" PRIu32 " pages", p->nrun + 1,
			    q->count);
		if (p->nrun > 0 && q[-1].kind == q->kind &&
		    (q->kind != GCK_RUN_BASE || (q[-1].base == q->base &&
		    q[-1].page + q[-1].count == q->page)))
			PWHY("a map not in its one form (runs %zu and %zu "
			    "are one)", p->nrun, p->nrun + 1);
		pages += q->count;
		if (pages > size / GCK_PAGE)
			PWHY("runs of more pages than the chunk's %" PRIu64,
			    size / GCK_PAGE);
		if (q->kind == GCK_RUN_STORED)
			spages += q->count;
		if (q->kind == GCK_RUN_BASE) {
			if (q->base >= p->nbase)
				PWHY("run %zu names base %" PRIu32 " of %zu",
				    p->nrun + 1, q->base + 1, p->nbase);
			bpages = p->bsize[q->base] / GCK_PAGE;
			if ((uint64_t)q->page + q->count > bpages)
				PWHY("run %zu runs past the end of its base",
				    p->nrun + 1);
			for (j = q->page; j < q->page + q->count; j++) {
				if ((used[q->base][j / 64] >> (j % 64)) & 1)
					PWHY("runs overlap in base %" PRIu32,
					    q->base + 1);
				used[q->base][j / 64] |= 1ull << (j % 64);
			}
			inuse[q->base] = 1;
		}
		p->nrun++;
	}
	if (pages != size / GCK_PAGE)
		PWHY("runs of %" PRIu64 " pages for a chunk of %" PRIu64,
		    pages, size / GCK_PAGE);
	if (spages * GCK_PAGE != stored)
		PWHY("runs of %" PRIu64 " stored pages, where it stores %"
		    PRIu64, spages, stored / GCK_PAGE);
	for (i = 0; i < p->nbase; i++)
		if (!inuse[i])
			PWHY("base %zu not used", i + 1);
	p->size = size;
	p->stored = stored;
	/* One form only: as a writer writes it. */
	if (gck_patch_text(p, again, sizeof again) != (int)len ||
	    memcmp(again, text, len) != 0)
		PWHY("a map not in its one form");
	return 0;
}

/*
 * The digest of a patch: SHA-256 of the len bytes of pages it stores,
 * its map (mlen bytes), and the size of its chunk as a 64-bit
 * little-endian number.  Returns 0, or -1 when out of memory.
 */
int
gck_patch_digest(const void *stored, size_t len, const char *map, size_t mlen,
    uint64_t size, struct gck_digest *d)
{
	struct gck_dstate	*s;

	if ((s = gck_dstate_new()) == NULL ||
	    gck_dstate_reset(s, GCK_DK_SHA256) == -1) {
		gck_dstate_free(s);
		return -1;
	}
	gck_dstate_update(s, stored, len);
	gck_dstate_update(s, map, mlen);
	gck_dstate_u64(s, size);
	gck_dstate_final(s, d);
	gck_dstate_free(s);
	return 0;
}
