/*
 * Unit tests for pagemap.c: a task's pages, read again as criu's
 * pagemap image lists them, and the checks of that image.
 */

#include "config.h"

#include <sys/mman.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "private.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "image/names.h"
#include "criu/criu-images.pb-c.h"
#include "unit.h"

#define PG		4096
#define COMMON_MAGIC	0x54564319u
#define PAGEMAP_MAGIC	0x56084025u
#define PE_PARENT	(1u << 0)
#define PE_LAZY		(1u << 1)
#define PE_PRESENT	(1u << 2)

struct img {
	char	buf[8192];
	size_t	len;
};

static void	img_start(struct img *, uint32_t, uint32_t, unsigned);
static void	img_entry(struct img *, uint64_t, uint32_t, uint32_t, int);
static void	sfiles(struct img *, struct gck_sfile *, struct gck_sfile *,
		    const char *, uint64_t);
static void	test_reads_own_memory(void **);
static void	test_lazy_present_is_read(void **);
static void	test_wrong_pages_file(void **);
static void	test_bad_magic(void **);
static void	test_truncated_record(void **);
static void	test_parent_pages(void **);
static void	test_size_mismatch(void **);
static void	test_unreadable_memory(void **);
static void	test_overlaps(void **);
static void	test_sample_digest(void **);

static void
put_record(struct img *im, const void *msg, size_t len)
{
	uint32_t	l = (uint32_t)len;

	assert_true(im->len + sizeof l + len <= sizeof im->buf);
	memcpy(im->buf + im->len, &l, sizeof l);
	memcpy(im->buf + im->len + sizeof l, msg, len);
	im->len += sizeof l + len;
}

/* A pagemap image: the magic numbers, then a head naming pages-ID.img. */
static void
img_start(struct img *im, uint32_t m0, uint32_t m1, unsigned id)
{
	PagemapHead	h = PAGEMAP_HEAD__INIT;
	uint8_t		msg[64];

	memset(im, 0, sizeof *im);
	memcpy(im->buf, &m0, 4);
	memcpy(im->buf + 4, &m1, 4);
	im->len = 8;
	h.pages_id = id;
	put_record(im, msg, pagemap_head__pack(&h, msg));
}

/*
 * One entry: nr pages at vaddr, with flags and the count where CRIU 4.2
 * writes them (or the old form: in_parent, the count where CRIU 4.1 and
 * older wrote it).
 */
static void
img_entry(struct img *im, uint64_t vaddr, uint32_t nr, uint32_t flags,
    int has_flags)
{
	PagemapEntry	e = PAGEMAP_ENTRY__INIT;
	uint8_t		msg[64];

	e.vaddr = vaddr;
	if (has_flags) {
		e.has_nr_pages = 1;
		e.nr_pages = nr;
	} else
		e.compat_nr_pages = nr;
	e.has_flags = has_flags;
	e.flags = flags;
	put_record(im, msg, pagemap_entry__pack(&e, msg));
}

static void
sfiles(struct img *im, struct gck_sfile *pm, struct gck_sfile *pages,
    const char *name, uint64_t size)
{
	memset(pm, 0, sizeof *pm);
	memset(pages, 0, sizeof *pages);
	snprintf(pm->name, sizeof pm->name, "pagemap-%d.img", (int)getpid());
	pm->data = im->buf;
	pm->len = im->len;
	snprintf(pages->name, sizeof pages->name, "%s", name);
	pages->pid = getpid();
	pages->pages = 1;
	pages->size = size;
}

static void
test_reads_own_memory(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_pmread	*p;
	struct gck_sfile	 pm, pages;
	struct img		 im;
	char			*mem, out[5 * PG];
	size_t			 i;

	mem = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	assert_true(mem != MAP_FAILED);
	for (i = 0; i < 8 * PG; i++)
		mem[i] = (char)(i * 7 + i / PG);
	/* pages 1-2, then 5-7: read back to back */
	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 3);
	img_entry(&im, (uintptr_t)mem + PG, 2, PE_PRESENT, 1);
	img_entry(&im, (uintptr_t)mem + 5 * PG, 3, 0, 0);	/* old form */
	sfiles(&im, &pm, &pages, "pages-3.img", 5 * PG);
	assert_int_equal(gck_pmread_open(ctx, &pm, &pages, pages.pid,
	    &p), GCK_OK);
	assert_int_equal(gck_pmread_read(p, out, 3 * PG - 100),
	    3 * PG - 100);
	assert_int_equal(gck_pmread_read(p, out + 3 * PG - 100, 5 * PG),
	    2 * PG + 100);
	assert_int_equal(gck_pmread_read(p, out, PG), 0);
	assert_memory_equal(out, mem + PG, 2 * PG);
	assert_memory_equal(out + 2 * PG, mem + 5 * PG, 3 * PG);
	gck_pmread_free(p);
	munmap(mem, 8 * PG);
}

/* criu marks anonymous pages lazy-capable even when it dumps them. */
static void
test_lazy_present_is_read(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_pmread	*p;
	struct gck_sfile	 pm, pages;
	struct img		 im;
	static char		 mem[2 * PG] __attribute__((aligned(PG)));
	char			 out[PG];

	memset(mem, 'x', sizeof mem);
	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 1);
	img_entry(&im, (uintptr_t)mem, 1, PE_PRESENT | PE_LAZY, 1);
	sfiles(&im, &pm, &pages, "pages-1.img", PG);
	assert_int_equal(gck_pmread_open(ctx, &pm, &pages, pages.pid,
	    &p), GCK_OK);
	assert_int_equal(gck_pmread_read(p, out, sizeof out), PG);
	assert_memory_equal(out, mem, PG);
	gck_pmread_free(p);
}

static void
expect_refused(struct gck_ctx *ctx, struct img *im, const char *name,
    uint64_t size, const char *why)
{
	struct gck_pmread	*p = NULL;
	struct gck_sfile	 pm, pages;

	sfiles(im, &pm, &pages, name, size);
	assert_int_equal(gck_pmread_open(ctx, &pm, &pages, pages.pid,
	    &p), GCK_ECRIU);
	assert_null(p);
	if (strstr(gck_error_string(ctx), why) == NULL)
		fail_msg("'%s' does not say '%s'", gck_error_string(ctx), why);
}

static void
test_wrong_pages_file(void **state)
{
	struct img	im;

	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 4);
	img_entry(&im, 0x10000, 1, PE_PRESENT, 1);
	expect_refused(*state, &im, "pages-3.img", PG,
	    "names pages-4.img, not 'pages-3.img'");
}

static void
test_bad_magic(void **state)
{
	struct img	im;

	img_start(&im, COMMON_MAGIC, 0x12345678, 1);
	expect_refused(*state, &im, "pages-1.img", 0, "cannot parse");
	img_start(&im, 0, PAGEMAP_MAGIC, 1);
	expect_refused(*state, &im, "pages-1.img", 0, "cannot parse");
	im.len = 6;
	expect_refused(*state, &im, "pages-1.img", 0, "cannot parse");
}

static void
test_truncated_record(void **state)
{
	struct img	im;

	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 1);
	img_entry(&im, 0x10000, 1, PE_PRESENT, 1);
	im.len -= 1;			/* the entry cut short */
	expect_refused(*state, &im, "pages-1.img", PG, "cannot parse");
	im.len -= 3;			/* a length, then nothing */
	expect_refused(*state, &im, "pages-1.img", PG, "cannot parse");
}

static void
test_parent_pages(void **state)
{
	struct img	im;

	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 1);
	img_entry(&im, 0x10000, 2, PE_PARENT, 1);
	expect_refused(*state, &im, "pages-1.img", 0,
	    "has pages that are not in the image");
	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 1);
	img_entry(&im, 0x10000, 1, PE_LAZY, 1);
	expect_refused(*state, &im, "pages-1.img", 0,
	    "has pages that are not in the image");
}

static void
test_size_mismatch(void **state)
{
	struct img	im;

	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 1);
	img_entry(&im, 0x10000, 3, PE_PRESENT, 1);
	expect_refused(*state, &im, "pages-1.img", 2 * PG,
	    "lists 12288 bytes of pages, criu wrote 8192");
}

static void
test_unreadable_memory(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_pmread	*p;
	struct gck_sfile	 pm, pages;
	struct img		 im;
	char			*mem, out[PG];

	/* a page mapped, then unmapped: nothing there to read */
	mem = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	assert_true(mem != MAP_FAILED);
	munmap(mem, PG);
	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 1);
	img_entry(&im, (uintptr_t)mem, 1, PE_PRESENT, 1);
	sfiles(&im, &pm, &pages, "pages-1.img", PG);
	assert_int_equal(gck_pmread_open(ctx, &pm, &pages, pages.pid,
	    &p), GCK_OK);
	assert_int_equal(gck_pmread_read(p, out, sizeof out), -1);
	assert_int_not_equal(gck_pmread_error(p), GCK_OK);
	assert_non_null(strstr(gck_error_string(ctx), "cannot read the memory of "
	    "process"));
	gck_pmread_free(p);
}

static void
test_overlaps(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_pmread	*p;
	struct gck_sfile	 pm, pages;
	struct img		 im;

	/* file bytes [0, 2 PG) are at 0x10000, [2 PG, 3 PG) at 0x40000 */
	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 1);
	img_entry(&im, 0x10000, 2, PE_PRESENT, 1);
	img_entry(&im, 0x40000, 1, PE_PRESENT, 1);
	sfiles(&im, &pm, &pages, "pages-1.img", 3 * PG);
	assert_int_equal(gck_pmread_open(ctx, &pm, &pages, pages.pid,
	    &p), GCK_OK);
	assert_true(gck_pmread_overlaps(p, 0, PG, 0x10ff0, 32));
	assert_false(gck_pmread_overlaps(p, PG, PG, 0x10ff0, 16));
	assert_true(gck_pmread_overlaps(p, 2 * PG, PG, 0x40010, 32));
	assert_false(gck_pmread_overlaps(p, 0, 2 * PG, 0x40010, 32));
	assert_false(gck_pmread_overlaps(p, 0, 3 * PG, 0x20000, 32));
	gck_pmread_free(p);
}

/* The samples: the first 4 KiB of every 64 KiB, nothing else. */
static void
test_sample_digest(void **state)
{
	static char	a[200000], b[200000];
	size_t		i;

	(void)state;
	for (i = 0; i < sizeof a; i++)
		a[i] = (char)(i * 31);
	memcpy(b, a, sizeof a);
	b[GCK_SAMPLE_LEN] ^= 1;			/* not sampled */
	assert_true(gck_sample_digest(a, sizeof a) ==
	    gck_sample_digest(b, sizeof b));
	b[GCK_SAMPLE_STRIDE + 100] ^= 1;	/* sampled */
	assert_true(gck_sample_digest(a, sizeof a) !=
	    gck_sample_digest(b, sizeof b));
	b[GCK_SAMPLE_STRIDE + 100] ^= 1;
	b[3 * GCK_SAMPLE_STRIDE + 5] ^= 1;	/* the short last sample */
	assert_true(gck_sample_digest(a, sizeof a) !=
	    gck_sample_digest(b, sizeof b));
}

/* The decoder, an entry at a time, flags as criu means them. */
static void
test_pagemap_entries(void **state)
{
	struct gck_pagemap	pm;
	struct gck_pmentry	e;
	PagemapEntry		pe = PAGEMAP_ENTRY__INIT;
	struct img		im;
	uint8_t			msg[64];

	(void)state;
	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 7);
	img_entry(&im, 0x10000, 2, PE_PRESENT | PE_LAZY, 1);
	img_entry(&im, 0x20000, 3, 0, 0);		/* old form: present */
	pe.vaddr = 0x30000;				/* old form: parent */
	pe.compat_nr_pages = 1;
	pe.has_in_parent = 1;
	pe.in_parent = 1;
	put_record(&im, msg, pagemap_entry__pack(&pe, msg));
	/* CRIU 4.1's flags and count, with a count of CRIU 4.2's: 4.2's. */
	pe = (PagemapEntry)PAGEMAP_ENTRY__INIT;
	pe.vaddr = 0x40000;
	pe.compat_nr_pages = 9;
	pe.has_nr_pages = 1;
	pe.nr_pages = (UINT64_C(1) << 33) + 5;	/* past 32 bits */
	pe.has_flags = 1;
	pe.flags = PE_PRESENT;
	put_record(&im, msg, pagemap_entry__pack(&pe, msg));
	assert_int_equal(gck_pagemap_open(&pm, im.buf, im.len), 0);
	assert_int_equal(pm.pages_id, 7);
	assert_int_equal(gck_pagemap_next(&pm, &e), 1);
	assert_int_equal(e.vaddr, 0x10000);
	assert_int_equal(e.nr_pages, 2);
	assert_int_equal(e.flags, PE_PRESENT | PE_LAZY);
	assert_int_equal(gck_pagemap_next(&pm, &e), 1);
	assert_int_equal(e.vaddr, 0x20000);
	assert_int_equal(e.nr_pages, 3);
	assert_int_equal(e.flags, PE_PRESENT);
	assert_int_equal(gck_pagemap_next(&pm, &e), 1);
	assert_int_equal(e.flags, PE_PARENT);
	assert_int_equal(e.nr_pages, 1);
	assert_int_equal(gck_pagemap_next(&pm, &e), 1);
	assert_int_equal(e.vaddr, 0x40000);
	assert_true(e.nr_pages == (UINT64_C(1) << 33) + 5);
	assert_int_equal(gck_pagemap_next(&pm, &e), 0);
	assert_int_equal(gck_pagemap_next(&pm, &e), 0);

	/* Cut inside its last record. */
	assert_int_equal(gck_pagemap_open(&pm, im.buf, im.len - 1), 0);
	assert_int_equal(gck_pagemap_next(&pm, &e), 1);
	assert_int_equal(gck_pagemap_next(&pm, &e), 1);
	assert_int_equal(gck_pagemap_next(&pm, &e), 1);
	assert_int_equal(gck_pagemap_next(&pm, &e), -1);

	/* A count past GCK_PE_MAX_PAGES is no entry. */
	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 7);
	pe.nr_pages = GCK_PE_MAX_PAGES + 1;
	put_record(&im, msg, pagemap_entry__pack(&pe, msg));
	assert_int_equal(gck_pagemap_open(&pm, im.buf, im.len), 0);
	assert_int_equal(gck_pagemap_next(&pm, &e), -1);

	/* No pagemap: another image, a header cut short, no head. */
	img_start(&im, COMMON_MAGIC, 0x12345678, 1);
	assert_int_equal(gck_pagemap_open(&pm, im.buf, im.len), -1);
	img_start(&im, COMMON_MAGIC, PAGEMAP_MAGIC, 1);
	assert_int_equal(gck_pagemap_open(&pm, im.buf, 6), -1);
	assert_int_equal(gck_pagemap_open(&pm, im.buf, 8), -1);
}

static void
test_pages_id(void **state)
{
	unsigned	id = 0;

	(void)state;
	assert_true(gck_pages_id("pages-12.img", &id));
	assert_int_equal(id, 12);
	assert_true(gck_pages_id("pages-0.img", &id));
	assert_int_equal(id, 0);
	assert_false(gck_pages_id("pages-.img", &id));
	assert_false(gck_pages_id("pages-+1.img", &id));
	assert_false(gck_pages_id("pages- 1.img", &id));
	assert_false(gck_pages_id("pages-1.imgx", &id));
	assert_false(gck_pages_id("pages-1", &id));
	assert_false(gck_pages_id("pages-99999999999.img", &id));
	assert_false(gck_pages_id("pagemap-1.img", &id));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		unit_ctx_test(test_reads_own_memory),
		unit_ctx_test(test_lazy_present_is_read),
		unit_ctx_test(test_wrong_pages_file),
		unit_ctx_test(test_bad_magic),
		unit_ctx_test(test_truncated_record),
		unit_ctx_test(test_parent_pages),
		unit_ctx_test(test_size_mismatch),
		unit_ctx_test(test_unreadable_memory),
		unit_ctx_test(test_overlaps),
		cmocka_unit_test(test_sample_digest),
		cmocka_unit_test(test_pagemap_entries),
		cmocka_unit_test(test_pages_id),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
