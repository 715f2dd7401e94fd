/*
 * Unit tests for patch.c: the page digests, the table of a parent's
 * pages, the plan of a chunk as a reference, a patch or stored whole,
 * and the maps of patches, written and read back or refused.
 */

#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"
#include "image/patch.h"

#define NP	8		/* pages of a test chunk */

/* Page i of a test chunk: bytes that say which. */
static void
fill_page(unsigned char *p, unsigned seed)
{
	size_t	i;

	for (i = 0; i < GCK_PAGE; i++)
		p[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

/* The digests of n pages at buf into pd, and which are zeros. */
static void
digests(const unsigned char *buf, size_t n, unsigned char *pd,
    unsigned char *zero)
{
	size_t	i, k;

	for (i = 0; i < n; i++) {
		gck_page_digest(buf + i * GCK_PAGE, pd + i * GCK_PDIG);
		for (k = 0; k < GCK_PAGE && buf[i * GCK_PAGE + k] == 0; k++)
			;
		zero[i] = k == GCK_PAGE;
	}
}

static void
test_zero_digest(void **state)
{
	static const unsigned char	z[GCK_PAGE];
	unsigned char			d[GCK_PDIG];

	(void)state;
	gck_page_digest(z, d);
	assert_memory_equal(d, gck_page_zero_digest(), GCK_PDIG);
}

/* A parent chunk A of NP pages, and chunks made of it. */
struct fx {
	unsigned char	 a[NP * GCK_PAGE], c[NP * GCK_PAGE];
	unsigned char	 pa[NP * GCK_PDIG], pc[NP * GCK_PDIG], za[NP], zc[NP];
	struct gck_ptab	 t;
	struct gck_digest da;
};

static void
fx_init(struct fx *f)
{
	size_t	i;

	for (i = 0; i < NP; i++)
		fill_page(f->a + i * GCK_PAGE, (unsigned)i + 1);
	digests(f->a, NP, f->pa, f->za);
	memset(&f->da, 0, sizeof f->da);
	f->da.kind = GCK_DK_SHA256;
	f->da.b[0] = 0xaa;
	gck_ptab_init(&f->t);
	assert_int_equal(gck_ptab_add(&f->t, &f->da, sizeof f->a, f->pa),
	    GCK_OK);
	assert_int_equal(gck_ptab_build(&f->t), GCK_OK);
	memcpy(f->c, f->a, sizeof f->c);
}

static int
plan(struct fx *f, struct gck_patch *p, size_t *ent)
{
	digests(f->c, NP, f->pc, f->zc);
	return gck_patch_plan(&f->t, f->pc, f->zc, NP, p, ent);
}

/* The map of p, read back: the same patch. */
static void
round_trip(const struct gck_patch *p)
{
	struct gck_patch	q;
	char			text[GCK_PATCH_MAP_MAX], why[160];
	int			n;

	assert_true((n = gck_patch_text(p, text, sizeof text)) > 0);
	assert_int_equal(gck_patch_parse(text, (size_t)n, p->size, p->stored,
	    &q, why, sizeof why), 0);
	assert_int_equal(q.nbase, p->nbase);
	assert_int_equal(q.nrun, p->nrun);
	assert_memory_equal(q.run, p->run, p->nrun * sizeof *p->run);
}

static void
test_plan(void **state)
{
	struct gck_patch	p;
	struct fx		*f;
	size_t			 ent = 99;
	uint32_t		 page;

	(void)state;
	assert_non_null(f = calloc(1, sizeof *f));
	fx_init(f);
	/* the same pages in order: a reference */
	assert_int_equal(plan(f, &p, &ent), GCK_PLAN_REF);
	assert_int_equal(ent, 0);
	assert_int_equal(gck_ptab_find(&f->t, f->pa + 3 * GCK_PDIG, &ent,
	    &page), 0);
	assert_int_equal(page, 3);
	/* one page rewritten: a patch that stores that page alone */
	fill_page(f->c + 5 * GCK_PAGE, 100);
	assert_int_equal(plan(f, &p, &ent), GCK_PLAN_PATCH);
	assert_int_equal(p.stored, GCK_PAGE);
	assert_int_equal(p.nbase, 1);
	assert_int_equal(p.nrun, 3);
	assert_int_equal(p.run[0].kind, GCK_RUN_BASE);
	assert_int_equal(p.run[0].count, 5);
	assert_int_equal(p.run[1].kind, GCK_RUN_STORED);
	assert_int_equal(p.run[2].page, 6);
	round_trip(&p);
	/* pages moved, and a page of zeros: found where they are */
	memcpy(f->c, f->a + 4 * GCK_PAGE, 4 * GCK_PAGE);
	memcpy(f->c + 4 * GCK_PAGE, f->a, 3 * GCK_PAGE);
	memset(f->c + 7 * GCK_PAGE, 0, GCK_PAGE);
	assert_int_equal(plan(f, &p, &ent), GCK_PLAN_PATCH);
	assert_int_equal(p.stored, 0);
	assert_int_equal(p.run[0].page, 4);
	assert_int_equal(p.run[p.nrun - 1].kind, GCK_RUN_ZERO);
	round_trip(&p);
	/* a page twice: the second stored, no page of a base used twice */
	memcpy(f->c, f->a, sizeof f->c);
	memcpy(f->c + GCK_PAGE, f->a, GCK_PAGE);
	assert_int_equal(plan(f, &p, &ent), GCK_PLAN_PATCH);
	assert_int_equal(p.stored, GCK_PAGE);
	round_trip(&p);
	/* most of it new: stored whole */
	for (page = 0; page < 7; page++)
		fill_page(f->c + page * GCK_PAGE, 200 + page);
	assert_int_equal(plan(f, &p, &ent), GCK_PLAN_FULL);
	gck_ptab_clear(&f->t);
	free(f);
}

static void
expect_bad(const char *text, uint64_t size, uint64_t stored,
    const char *sub)
{
	struct gck_patch	p;
	char			why[160];

	assert_int_equal(gck_patch_parse(text, strlen(text), size, stored, &p,
	    why, sizeof why), -1);
	if (strstr(why, sub) == NULL)
		fail_msg("map '%s': '%s' lacks '%s'", text, why, sub);
}

#define B0	"base " \
	"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define B1	"base " \
	"ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

static void
test_parse(void **state)
{
	struct gck_patch	p;
	char			why[160];
	const char		*ok = B0 " 16384\nB 2 0 0\nS 1\nZ 1\n";

	(void)state;
	assert_int_equal(gck_patch_parse(ok, strlen(ok), 16384, 4096, &p, why,
	    sizeof why), 0);
	assert_int_equal(p.nrun, 3);
	expect_bad(ok, 20480, 4096, "pages for a chunk");
	expect_bad(ok, 16384, 8192, "stored pages");
	expect_bad(B0 " 16384\nB 2 0 0\nB 1 0 1\nS 1\n", 16384, 4096,
	    "overlap");
	expect_bad(B0 " 16384\nB 1 0 0\nB 1 0 1\nZ 2\n", 16384, 0,
	    "one form");
	expect_bad(B0 " 16384\nZ 1\nZ 3\n", 16384, 0, "one form");
	expect_bad(B0 " 8192\nB 3 0 0\nZ 1\n", 16384, 0, "past the end");
	expect_bad(B0 " 16384\nB 4 1 0\n", 16384, 0, "names base 2");
	expect_bad(B0 " 16384\n" B0 " 16384\nB 4 0 0\n", 16384, 0,
	    "named twice");
	expect_bad(B0 " 16384\n" B1 " 16384\nB 4 0 0\n", 16384, 0,
	    "not used");
	expect_bad("Z 4\n", 16384, 0, "no base");
	expect_bad(B0 " 16384\nB 04 0 0\n", 16384, 0, "one form");
	expect_bad(B0 " 16384\nB 0 0 0\nB 4 0 0\n", 16384, 0, "of 0 pages");
	expect_bad(B0 " 16384\nB 4 0 0", 16384, 0, "unreadable");
	expect_bad(B0 " 16384\nQ 4\n", 16384, 0, "unreadable");
	expect_bad(B0 " 16385\nB 4 0 0\n", 16384, 0, "bad size");
	expect_bad(B0 " 16384\nB 1 0 4294967296\nZ 3\n", 16384, 0,
	    "unreadable");
	expect_bad(B0 " 16384\nS 4\n", 16384, 16384, "storing");
	expect_bad("", 16384, 0, "a map of 0 bytes");
}

/* Test chunk i of two pages: their digests, pb, and its digest, *d. */
static void
small_chunk(const struct fx *f, size_t i, unsigned char *pb,
    struct gck_digest *d)
{
	unsigned char	b[2 * GCK_PAGE], zb[2];

	fill_page(b, (unsigned)(100 + i));
	fill_page(b + GCK_PAGE, (unsigned)(200 + i));
	digests(b, 2, pb, zb);
	*d = f->da;
	d->b[0] = (unsigned char)i;
	d->b[1] = 0x55;
}

/* The pages of a chunk found by its digest and size, of each chunk. */
static void
test_pages(void **state)
{
	struct fx		 f;
	struct gck_digest	 d;
	unsigned char		 pb[2 * GCK_PDIG];
	const unsigned char	*pd;
	size_t			 i;

	(void)state;
	fx_init(&f);
	assert_null(gck_ptab_pages(&f.t, &f.da, sizeof f.a / 2));
	/* more chunks, added after the build: found once built again */
	for (i = 0; i < 40; i++) {
		small_chunk(&f, i, pb, &d);
		assert_int_equal(gck_ptab_add(&f.t, &d, 2 * GCK_PAGE, pb),
		    GCK_OK);
	}
	assert_int_equal(gck_ptab_build(&f.t), GCK_OK);
	assert_non_null(pd = gck_ptab_pages(&f.t, &f.da, sizeof f.a));
	assert_memory_equal(pd, f.pa, sizeof f.pa);
	for (i = 0; i < 40; i++) {
		small_chunk(&f, i, pb, &d);
		assert_non_null(pd = gck_ptab_pages(&f.t, &d, 2 * GCK_PAGE));
		assert_memory_equal(pd, pb, sizeof pb);
		d.b[2] = 1;
		assert_null(gck_ptab_pages(&f.t, &d, 2 * GCK_PAGE));
	}
	gck_ptab_clear(&f.t);
	assert_null(gck_ptab_pages(&f.t, &f.da, sizeof f.a));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zero_digest),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_pages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
