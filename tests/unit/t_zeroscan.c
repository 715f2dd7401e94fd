/*
 * Unit tests for zeroscan.c: the zero pages of private anonymous memory
 * found in a task's pages (our own), the pagemap rewritten without them,
 * and the samples checked on the way.
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
#include "criu/zeroscan.h"
#include "criu/criu-images.pb-c.h"
#include "unit.h"

#define PG		4096
#define NPG		8
#define COMMON_MAGIC	0x54564319u
#define PAGEMAP_MAGIC	0x56084025u
#define MM_MAGIC	0x57492820u
#define PE_PARENT	(1u << 0)
#define PE_LAZY		(1u << 1)
#define PE_PRESENT	(1u << 2)
#define ST_PRIVATE	((1u << 0) | (1u << 9))	/* regular, anon private */
#define ST_FILE		((1u << 0) | (1u << 6))	/* regular, file private */

/* An image of CRIU's: its magic numbers, then records. */
struct img {
	char	buf[8192];
	size_t	len;
};

/* A task's files, and the memory they describe. */
struct task {
	struct img		 pmi, mmi;
	struct gck_sfile	 pm, pages, mm;
	uint64_t		 digests[NPG];
	char			*mem;
};

static void	put_record(struct img *, const void *, size_t);
static void	img_magic(struct img *, uint32_t);
static void	pm_entry(struct img *, uint64_t, uint32_t, uint32_t);
static void	mm_image(struct img *, uint64_t, uint64_t, uint32_t, uint32_t);
static void	task_new(struct task *, uint32_t, size_t);
static void	task_free(struct task *);
static size_t	entries(const char *, size_t, struct gck_pmentry *, size_t);
static void	test_drops_zero_pages(void **);
static void	test_parts(void **);
static void	test_file_mapping_kept(void **);
static void	test_no_mm(void **);
static void	test_changed(void **);
static void	test_rseq(void **);
static void	test_unreadable(void **);

static void
put_record(struct img *im, const void *msg, size_t len)
{
	uint32_t	l = (uint32_t)len;

	assert_true(im->len + sizeof l + len <= sizeof im->buf);
	memcpy(im->buf + im->len, &l, sizeof l);
	memcpy(im->buf + im->len + sizeof l, msg, len);
	im->len += sizeof l + len;
}

static void
img_magic(struct img *im, uint32_t magic)
{
	uint32_t	m0 = COMMON_MAGIC;

	memset(im, 0, sizeof *im);
	memcpy(im->buf, &m0, 4);
	memcpy(im->buf + 4, &magic, 4);
	im->len = 8;
}

static void
pm_entry(struct img *im, uint64_t vaddr, uint32_t nr, uint32_t flags)
{
	PagemapEntry	e = PAGEMAP_ENTRY__INIT;
	uint8_t		msg[64];

	e.vaddr = vaddr;
	e.has_nr_pages = 1;		/* as CRIU 4.2 writes it */
	e.nr_pages = nr;
	e.has_flags = 1;
	e.flags = flags;
	put_record(im, msg, pagemap_entry__pack(&e, msg));
}

/* An mm image of one mapping, [start, end). */
static void
mm_image(struct img *im, uint64_t start, uint64_t end, uint32_t flags,
    uint32_t status)
{
	MmEntry		 me = MM_ENTRY__INIT;
	VmaEntry	 v = VMA_ENTRY__INIT, *vp = &v;
	uint8_t		 msg[256];

	img_magic(im, MM_MAGIC);
	v.has_start = v.has_end = v.has_flags = v.has_status = 1;
	v.start = start;
	v.end = end;
	v.flags = flags;
	v.status = status;
	me.n_vmas = 1;
	me.vmas = &vp;
	put_record(im, msg, mm_entry__pack(&me, msg));
}

/*
 * Our own NPG pages, a mapping of status, as one lazy entry of the
 * pagemap: pages 0, 3 and 6 hold data, 4 is zero but for its last byte,
 * the others are zero.  The samples are taken in parts of part_size.
 */
static void
task_new(struct task *t, uint32_t status, size_t part_size)
{
	PagemapHead	h = PAGEMAP_HEAD__INIT;
	uint8_t		msg[64];
	size_t		i, p;

	memset(t, 0, sizeof *t);
	t->mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	assert_true(t->mem != MAP_FAILED);
	memset(t->mem, 0, NPG * PG);
	for (i = 0; i < PG; i++) {
		t->mem[i] = (char)(i + 1);
		t->mem[3 * PG + i] = (char)(i + 2) | 1;
		t->mem[6 * PG + i] = (char)(i + 3) | 1;
	}
	t->mem[5 * PG - 1] = 1;
	img_magic(&t->pmi, PAGEMAP_MAGIC);
	h.pages_id = 3;
	put_record(&t->pmi, msg, pagemap_head__pack(&h, msg));
	pm_entry(&t->pmi, (uintptr_t)t->mem, NPG, PE_PRESENT | PE_LAZY);
	mm_image(&t->mmi, (uintptr_t)t->mem, (uintptr_t)t->mem + NPG * PG,
	    MAP_PRIVATE | MAP_ANONYMOUS, status);
	snprintf(t->pm.name, sizeof t->pm.name, "pagemap-%d.img",
	    (int)getpid());
	t->pm.data = t->pmi.buf;
	t->pm.len = t->pmi.len;
	snprintf(t->mm.name, sizeof t->mm.name, "mm-%d.img", (int)getpid());
	t->mm.data = t->mmi.buf;
	t->mm.len = t->mmi.len;
	snprintf(t->pages.name, sizeof t->pages.name, "pages-3.img");
	t->pages.pid = getpid();
	t->pages.pages = 1;
	t->pages.size = NPG * PG;
	t->pages.digests = t->digests;
	for (p = 0; p * part_size < NPG * PG; p++)
		t->digests[t->pages.ndigests++] = gck_sample_digest(t->mem +
		    p * part_size, NPG * PG - p * part_size < part_size ?
		    NPG * PG - p * part_size : part_size);
}

static void
task_free(struct task *t)
{
	munmap(t->mem, NPG * PG);
}

/* The entries of pagemap image data, len bytes, up to n into e. */
static size_t
entries(const char *data, size_t len, struct gck_pmentry *e, size_t n)
{
	struct gck_pagemap	pm;
	size_t			i = 0;

	assert_int_equal(gck_pagemap_open(&pm, data, len), 0);
	assert_int_equal(pm.pages_id, 3);
	while (i < n && gck_pagemap_next(&pm, &e[i]) == 1)
		i++;
	return i;
}

static void
test_drops_zero_pages(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_pmentry	 e[8];
	struct gck_zero		 z;
	struct task		 t;

	task_new(&t, ST_PRIVATE, 16u << 20);
	assert_gck_ok(ctx, gck_zero_pages(ctx, &t.pm, &t.pages, &t.mm,
	    getpid(), NULL, 0, 16u << 20, &z));
	/* pages 1, 2, 5 and 7 go; 4, zero but for its last byte, stays */
	assert_int_equal(z.dropped, 4 * PG);
	assert_int_equal(z.size, 4 * PG);
	assert_non_null(z.pagemap);
	assert_int_equal(entries(z.pagemap, z.len, e, 8), 3);
	assert_true(e[0].vaddr == (uintptr_t)t.mem && e[0].nr_pages == 1);
	assert_true(e[1].vaddr == (uintptr_t)t.mem + 3 * PG &&
	    e[1].nr_pages == 2);
	assert_true(e[2].vaddr == (uintptr_t)t.mem + 6 * PG &&
	    e[2].nr_pages == 1);
	/* an entry split keeps its flags */
	assert_int_equal(e[0].flags, PE_PRESENT | PE_LAZY);
	assert_int_equal(e[2].flags, PE_PRESENT | PE_LAZY);
	free(z.pagemap);
	task_free(&t);
}

/* Parts of 3 pages, scanned on threads of their own: the same. */
static void
test_parts(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_pmentry	 e[8];
	struct gck_zero		 z;
	struct task		 t;

	task_new(&t, ST_PRIVATE, 3 * PG);
	assert_int_equal(t.pages.ndigests, 3);
	assert_gck_ok(ctx, gck_zero_pages(ctx, &t.pm, &t.pages, &t.mm,
	    getpid(), NULL, 0, 3 * PG, &z));
	assert_int_equal(z.dropped, 4 * PG);
	assert_int_equal(entries(z.pagemap, z.len, e, 8), 3);
	free(z.pagemap);
	task_free(&t);
}

/* A private mapping of a file keeps its zero pages: nothing rewritten. */
static void
test_file_mapping_kept(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct gck_zero	 z;
	struct task	 t;

	task_new(&t, ST_FILE, 16u << 20);
	assert_gck_ok(ctx, gck_zero_pages(ctx, &t.pm, &t.pages, &t.mm,
	    getpid(), NULL, 0, 16u << 20, &z));
	assert_int_equal(z.dropped, 0);
	assert_int_equal(z.size, NPG * PG);
	assert_null(z.pagemap);
	task_free(&t);
}

/* Without the mm image nothing is known to be private: nothing goes. */
static void
test_no_mm(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct gck_zero	 z;
	struct task	 t;

	task_new(&t, ST_PRIVATE, 16u << 20);
	assert_gck_ok(ctx, gck_zero_pages(ctx, &t.pm, &t.pages, NULL,
	    getpid(), NULL, 0, 16u << 20, &z));
	assert_int_equal(z.dropped, 0);
	assert_null(z.pagemap);
	task_free(&t);
}

/* A sample that is no longer what criu wrote fails the checkpoint. */
static void
test_changed(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct gck_zero	 z;
	struct task	 t;
	char		 msg[128];

	task_new(&t, ST_PRIVATE, 3 * PG);
	t.mem[3 * PG + 100] ^= 1;	/* the sample of part 1 */
	snprintf(msg, sizeof msg, "the memory of process %d changed after "
	    "criu dumped it (part 1 of 'pages-3.img')", (int)getpid());
	assert_gck_fails(ctx, gck_zero_pages(ctx, &t.pm, &t.pages, &t.mm,
	    getpid(), NULL, 0, 3 * PG, &z), GCK_ECRIU, msg);
	assert_null(z.pagemap);
	task_free(&t);
}

/* But the kernel may write an rseq area: its page stays, checked or not. */
static void
test_rseq(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct gck_area	 rseq;
	struct gck_zero	 z;
	struct task	 t;

	task_new(&t, ST_PRIVATE, 3 * PG);
	t.mem[3 * PG + 100] ^= 1;
	rseq.addr = (uintptr_t)t.mem + 5 * PG + 64;	/* a zero page */
	rseq.size = 32;
	assert_gck_ok(ctx, gck_zero_pages(ctx, &t.pm, &t.pages, &t.mm,
	    getpid(), &rseq, 1, 3 * PG, &z));
	assert_int_equal(z.dropped, 3 * PG);		/* not page 5 */
	free(z.pagemap);
	task_free(&t);
}

static void
test_unreadable(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct gck_zero	 z;
	struct task	 t;

	task_new(&t, ST_PRIVATE, 16u << 20);
	munmap(t.mem + 2 * PG, PG);
	assert_int_not_equal(gck_zero_pages(ctx, &t.pm, &t.pages, &t.mm,
	    getpid(), NULL, 0, 16u << 20, &z), GCK_OK);
	assert_non_null(strstr(gck_error_string(ctx), "cannot read the "
	    "memory of process"));
	assert_null(z.pagemap);
	task_free(&t);
}

int
main(void)
{
	static const struct CMUnitTest tests[] = {
		unit_ctx_test(test_drops_zero_pages),
		unit_ctx_test(test_parts),
		unit_ctx_test(test_file_mapping_kept),
		unit_ctx_test(test_no_mm),
		unit_ctx_test(test_changed),
		unit_ctx_test(test_rseq),
		unit_ctx_test(test_unreadable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
