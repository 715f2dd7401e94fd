/*
 * Unit tests for the image diff of inspect.c, gck_inspect_diff().
 *
 * Each test describes two images, a and b, as processes with their
 * mappings and dumped pages, shared memory segments, files.img entries
 * and other CRIU files; writes them with the library's writer into
 * memory files, as criu's images would be: a manifest, mm-PID.img,
 * pagemap-PID.img, pagemap-shmem-ID.img and pages-ID.img; and checks
 * the diff document against values worked out from that description.
 */

#include "config.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>

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

#include <jansson.h>

#include "private.h"
#include "image/image.h"
#include "criu/criu-images.pb-c.h"
#include "unit.h"

#define PG		4096
#define PART		8192		/* pages files span several parts */
#define ODD_PART	6000		/* pages straddle parts */
#define COMMON_MAGIC	0x54564319u
#define MM_MAGIC	0x57492820u
#define PAGEMAP_MAGIC	0x56084025u
#define FILES_MAGIC	0x56303138u
#define PE_PRESENT	(1u << 2)

/* CRIU's VMA status bits */
#define VMA_REGULAR	(1u << 0)
#define VMA_HEAP	(1u << 5)
#define VMA_FILE_PRIV	(1u << 6)
#define VMA_ANON_SHARED	(1u << 8)
#define VMA_ANON_PRIV	(1u << 9)

#define MAXPROC		4
#define MAXVMA		8
#define MAXPAGE		24
#define MAXFILE		32

/* The test image's mappings and pages. */
#define TEXT_START	0x400000ull
#define HEAP_START	0x600000ull
#define ANON_START	0x7f0000000000ull
#define SHM_START	0x7f0000100000ull
#define LIB_START	0x7f0000200000ull
#define NEW_START	0x7f0000300000ull
#define WSHM_START	0x7f0000500000ull
#define WANON_START	0x10000ull
#define SHMID		85
#define SERVER_PAGES	13		/* pages process 100 dumps */

/* A dumped page: seed 0 is a page of zeros. */
struct tpage {
	uint64_t	 addr;
	unsigned	 seed;
};

/* The pages a pagemap lists, in address order. */
struct tmem {
	struct tpage	 pg[MAXPAGE];
	size_t		 n;
	unsigned	 extra;		/* listed, not in the pages file */
};

struct tvma {
	uint64_t	 start, end, pgoff, shmid;
	uint32_t	 prot, flags, status;
};

struct tproc {
	int		 pid, ppid;
	const char	*comm;
	const char	*argv[4];
	int		 threads;
	int		 gpu;		/* index into gpus[], or -1 */
	json_int_t	 gmem;
	unsigned	 pages_id;
	struct tvma	 v[MAXVMA];
	size_t		 nv;
	struct tmem	 mem;
	const char	*mm;		/* bytes instead of an mm image */
	size_t		 mmlen;
};

struct tshm {
	uint64_t	 id;
	unsigned	 pages_id;
	struct tmem	 mem;
};

/* An entry of files.img. */
struct tfent {
	uint32_t	 id;
	const char	*path;
};

/* Another CRIU file, kept as it is. */
struct textra {
	const char	*name;
	const char	*text;
};

struct timg {
	struct tproc	 p[MAXPROC];
	size_t		 np;
	struct tshm	 s[2];
	size_t		 ns;
	struct tfent	 f[4];
	size_t		 nf;
	struct textra	 x[4];
	size_t		 nx;
	const char	*inventory;
	size_t		 part;
	int		 level;
};

/* A file of the image being written. */
struct blob {
	char		 name[64];
	char		*data;
	size_t		 len;
	int		 pages;
};

struct blobs {
	struct blob	 b[MAXFILE];
	size_t		 n;
};

struct buf {
	char		*p;
	size_t		 len, cap;
};

struct tgpu {
	int		 index;
	const char	*uuid, *name, *cc;
	json_int_t	 memory;
	const char	*pci;
};

static const struct tgpu gpus[] = {
	{ 0, "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
	    "NVIDIA H100 80GB HBM3", "9.0", 85520809984, "00000000:19:00.0" },
	{ 1, "GPU-f0e1d2c3-b4a5-9687-7869-5a4b3c2d1e0f",
	    "NVIDIA A100-SXM4-40GB", "8.0", 42505273344, "00000000:3b:00.0" },
};

static void	 base_image(struct timg *);
static struct tproc *tproc(struct timg *, int);
static struct tshm *tshm(struct timg *, uint64_t);
static void	 page_set(struct tmem *, uint64_t, unsigned);
static void	 page_add(struct tmem *, uint64_t, unsigned);
static void	 page_drop(struct tmem *, uint64_t);
static struct tvma *vma_get(struct tproc *, uint64_t);
static void	 vma_add(struct tproc *, const struct tvma *);
static void	 vma_drop(struct tproc *, uint64_t);
static void	 fill_page(char *, unsigned);
static void	 buf_put(struct buf *, const void *, size_t);
static void	 buf_u32(struct buf *, uint32_t);
static void	 buf_record(struct buf *, const ProtobufCMessage *);
static void	 blob_add(struct blobs *, const char *, char *, size_t, int);
static void	 blob_text(struct blobs *, const char *, const char *);
static void	 blob_pagemap(struct blobs *, const char *, unsigned,
		    const struct tmem *);
static void	 blob_pages(struct blobs *, unsigned, const struct tmem *);
static void	 blob_mm(struct blobs *, const struct tproc *);
static void	 blob_files(struct blobs *, const struct timg *);
static void	 blobs_build(const struct timg *, struct blobs *);
static void	 blobs_free(struct blobs *);
static char	*manifest_text(const struct timg *, const struct blobs *);
static void	 add_split(struct gck_ctx *, struct gck_writer *,
		    const struct blob *, size_t);
static int	 write_image(struct gck_ctx *, const struct timg *);
static json_t	*diff(struct gck_ctx *, const struct timg *,
		    const struct timg *, int *);
static int	 diff_fails(struct gck_ctx *, const struct timg *, int);
static json_t	*hexaddr(uint64_t);
static json_t	*want_vma(uint64_t, uint64_t, const char *, const char *,
		    const char *, const char *, uint64_t);
static json_t	*want_gpu(int, json_int_t);
static json_t	*want_memory(json_int_t, json_int_t, json_int_t);
static void	 check_json(json_t *, json_t *, const char *, int);
static void	 check_strings(int, json_t *, const char *, ...);
static json_t	*changed_proc(json_t *, int);
static void	 expect_no_process_change(json_t *);
static void	 test_identical(void **);
static void	 test_identical_odd_parts(void **);
static void	 test_page_changed(void **);
static void	 test_page_changed_kinds(void **);
static void	 test_page_changed_across_parts(void **);
static void	 test_page_dropped(void **);
static void	 test_zero_page_dropped(void **);
static void	 test_mappings(void **);
static void	 test_mapping_shrunk(void **);
static void	 test_mapping_no_files(void **);
static void	 test_shared_memory(void **);
static void	 test_processes_added_removed(void **);
static void	 test_process_cmdline(void **);
static void	 test_process_threads(void **);
static void	 test_process_gpus(void **);
static void	 test_files(void **);
static void	 test_differ_files_only(void **);
static void	 test_part_size_only(void **);
static void	 test_truncated(void **);
static void	 test_pagemap_overruns(void **);
static void	 test_mm_garbage(void **);
static void	 test_show_totals_bounded(void **);

#define expect_json(got, want, what)					\
	check_json((got), (want), (what), __LINE__)
#define expect_strings(...)						\
	check_strings(__LINE__, __VA_ARGS__)

/*
 * The image most tests start from: a server (pid 100) with a text, a
 * heap, anonymous memory, a shared segment and a library mapped, and a
 * worker (pid 101) with anonymous memory and part of the same segment.
 */
static void
base_image(struct timg *t)
{
	struct tproc	*p;
	struct tshm	*s;
	size_t		 i;

	memset(t, 0, sizeof *t);
	t->part = PART;
	t->inventory = "inventory of the tree";

	p = &t->p[t->np++];
	p->pid = 100;
	p->ppid = 1;
	p->comm = "server";
	p->argv[0] = "server";
	p->argv[1] = "--port";
	p->argv[2] = "80";
	p->threads = 2;
	p->gpu = 0;
	p->gmem = 1073741824;
	p->pages_id = 1;
	p->v[p->nv++] = (struct tvma){ TEXT_START, TEXT_START + 2 * PG, 0, 7,
	    5, 2, VMA_REGULAR | VMA_FILE_PRIV };
	p->v[p->nv++] = (struct tvma){ HEAP_START, HEAP_START + 4 * PG, 0, 0,
	    3, 2, VMA_REGULAR | VMA_ANON_PRIV | VMA_HEAP };
	p->v[p->nv++] = (struct tvma){ ANON_START, ANON_START + 8 * PG, 0, 0,
	    3, 0x22, VMA_REGULAR | VMA_ANON_PRIV };
	p->v[p->nv++] = (struct tvma){ SHM_START, SHM_START + 4 * PG, 0,
	    SHMID, 3, 0x21, VMA_REGULAR | VMA_ANON_SHARED };
	p->v[p->nv++] = (struct tvma){ LIB_START, LIB_START + PG, 0, 8, 1, 2,
	    VMA_REGULAR | VMA_FILE_PRIV };
	page_add(&p->mem, TEXT_START, 1);
	page_add(&p->mem, HEAP_START, 2);
	page_add(&p->mem, HEAP_START + PG, 0);
	page_add(&p->mem, HEAP_START + 2 * PG, 3);
	page_add(&p->mem, HEAP_START + 3 * PG, 4);
	for (i = 0; i < 8; i++)
		page_add(&p->mem, ANON_START + i * PG, i == 3 ? 0 :
		    5 + (unsigned)i);

	p = &t->p[t->np++];
	p->pid = 101;
	p->ppid = 100;
	p->comm = "worker";
	p->argv[0] = "worker";
	p->threads = 1;
	p->gpu = -1;
	p->pages_id = 2;
	p->v[p->nv++] = (struct tvma){ WANON_START, WANON_START + 2 * PG, 0,
	    0, 3, 0x22, VMA_REGULAR | VMA_ANON_PRIV };
	/* segment offsets [PG, 3 PG) */
	p->v[p->nv++] = (struct tvma){ WSHM_START, WSHM_START + 2 * PG, PG,
	    SHMID, 3, 0x21, VMA_REGULAR | VMA_ANON_SHARED };
	page_add(&p->mem, WANON_START, 30);
	page_add(&p->mem, WANON_START + PG, 31);

	s = &t->s[t->ns++];
	s->id = SHMID;
	s->pages_id = 3;
	for (i = 0; i < 4; i++)
		page_add(&s->mem, i * PG, 40 + (unsigned)i);

	t->f[t->nf++] = (struct tfent){ 7, "/usr/bin/server" };
	t->f[t->nf++] = (struct tfent){ 8, "/usr/lib/libgpu.so" };
}

static struct tproc *
tproc(struct timg *t, int pid)
{
	size_t	i;

	for (i = 0; i < t->np; i++)
		if (t->p[i].pid == pid)
			return &t->p[i];
	fail_msg("no process %d", pid);
	return NULL;
}

static struct tshm *
tshm(struct timg *t, uint64_t id)
{
	size_t	i;

	for (i = 0; i < t->ns; i++)
		if (t->s[i].id == id)
			return &t->s[i];
	fail_msg("no segment %" PRIu64, id);
	return NULL;
}

static void
page_set(struct tmem *m, uint64_t addr, unsigned seed)
{
	size_t	i;

	for (i = 0; i < m->n; i++)
		if (m->pg[i].addr == addr) {
			m->pg[i].seed = seed;
			return;
		}
	fail_msg("no page at 0x%" PRIx64, addr);
}

static void
page_add(struct tmem *m, uint64_t addr, unsigned seed)
{
	size_t	i;

	assert_true(m->n < MAXPAGE);
	for (i = m->n; i > 0 && m->pg[i - 1].addr > addr; i--)
		m->pg[i] = m->pg[i - 1];
	m->pg[i].addr = addr;
	m->pg[i].seed = seed;
	m->n++;
}

static void
page_drop(struct tmem *m, uint64_t addr)
{
	size_t	i;

	for (i = 0; i < m->n; i++)
		if (m->pg[i].addr == addr) {
			memmove(&m->pg[i], &m->pg[i + 1], (m->n - i - 1) *
			    sizeof m->pg[0]);
			m->n--;
			return;
		}
	fail_msg("no page at 0x%" PRIx64, addr);
}

static struct tvma *
vma_get(struct tproc *p, uint64_t start)
{
	size_t	i;

	for (i = 0; i < p->nv; i++)
		if (p->v[i].start == start)
			return &p->v[i];
	fail_msg("no mapping at 0x%" PRIx64, start);
	return NULL;
}

static void
vma_add(struct tproc *p, const struct tvma *v)
{
	size_t	i;

	assert_true(p->nv < MAXVMA);
	for (i = p->nv; i > 0 && p->v[i - 1].start > v->start; i--)
		p->v[i] = p->v[i - 1];
	p->v[i] = *v;
	p->nv++;
}

static void
vma_drop(struct tproc *p, uint64_t start)
{
	struct tvma	*v = vma_get(p, start);
	size_t		 i = (size_t)(v - p->v);

	memmove(&p->v[i], &p->v[i + 1], (p->nv - i - 1) * sizeof p->v[0]);
	p->nv--;
}

/* A page of seed's bytes; seed 0 gives zeros, others never do. */
static void
fill_page(char *pg, unsigned seed)
{
	size_t	i;

	if (seed == 0) {
		memset(pg, 0, PG);
		return;
	}
	for (i = 0; i < PG; i++)
		pg[i] = (char)(seed * 167u + i * 13u + (i >> 7));
	pg[0] = (char)(seed | 0x80);
	pg[1] = (char)seed;
}

static void
buf_put(struct buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2 + 64;
		assert_non_null(b->p = realloc(b->p, b->cap));
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
}

static void
buf_u32(struct buf *b, uint32_t v)
{
	buf_put(b, &v, sizeof v);
}

/* A CRIU image record: its length, then the packed message. */
static void
buf_record(struct buf *b, const ProtobufCMessage *msg)
{
	uint8_t	*p;
	size_t	 len = protobuf_c_message_get_packed_size(msg);

	assert_non_null(p = malloc(len + 1));
	assert_int_equal(protobuf_c_message_pack(msg, p), len);
	buf_u32(b, (uint32_t)len);
	buf_put(b, p, len);
	free(p);
}

/* Adds a file of the image; it takes data. */
static void
blob_add(struct blobs *bs, const char *name, char *data, size_t len,
    int pages)
{
	struct blob	*b;

	assert_true(bs->n < MAXFILE);
	b = &bs->b[bs->n++];
	snprintf(b->name, sizeof b->name, "%s", name);
	b->data = data;
	b->len = len;
	b->pages = pages;
}

static void
blob_text(struct blobs *bs, const char *name, const char *text)
{
	char	*d;

	assert_non_null(d = strdup(text));
	blob_add(bs, name, d, strlen(text), 0);
}

/* A pagemap image: a run of pages per entry, then any extra pages. */
static void
blob_pagemap(struct blobs *bs, const char *name, unsigned pages_id,
    const struct tmem *m)
{
	PagemapHead	 h = PAGEMAP_HEAD__INIT;
	PagemapEntry	 e = PAGEMAP_ENTRY__INIT;
	struct buf	 b = { 0 };
	size_t		 i, j;

	buf_u32(&b, COMMON_MAGIC);
	buf_u32(&b, PAGEMAP_MAGIC);
	h.pages_id = pages_id;
	buf_record(&b, &h.base);
	for (i = 0; i < m->n; i = j) {
		for (j = i + 1; j < m->n && m->pg[j].addr ==
		    m->pg[j - 1].addr + PG; j++)
			;
		e.vaddr = m->pg[i].addr;
		e.has_nr_pages = 1;		/* as CRIU 4.2 writes it */
		e.nr_pages = j - i;
		if (j == m->n)
			e.nr_pages += m->extra;
		e.has_flags = 1;
		e.flags = PE_PRESENT;
		buf_record(&b, &e.base);
	}
	blob_add(bs, name, b.p, b.len, 0);
}

/* The pages file that goes with a pagemap: its pages, in order. */
static void
blob_pages(struct blobs *bs, unsigned pages_id, const struct tmem *m)
{
	char	 name[64], *d;
	size_t	 i;

	assert_non_null(d = calloc(m->n + 1, PG));
	for (i = 0; i < m->n; i++)
		fill_page(d + i * PG, m->pg[i].seed);
	snprintf(name, sizeof name, "pages-%u.img", pages_id);
	blob_add(bs, name, d, m->n * PG, 1);
}

static void
blob_mm(struct blobs *bs, const struct tproc *p)
{
	MmEntry		 mm = MM_ENTRY__INIT;
	VmaEntry	 ve[MAXVMA], *vp[MAXVMA];
	struct buf	 b = { 0 };
	char		 name[64], *d;
	size_t		 i;

	snprintf(name, sizeof name, "mm-%d.img", p->pid);
	if (p->mm != NULL) {
		assert_non_null(d = malloc(p->mmlen + 1));
		memcpy(d, p->mm, p->mmlen);
		blob_add(bs, name, d, p->mmlen, 0);
		return;
	}
	for (i = 0; i < p->nv; i++) {
		vma_entry__init(&ve[i]);
		ve[i].has_start = ve[i].has_end = ve[i].has_pgoff = 1;
		ve[i].has_shmid = ve[i].has_prot = ve[i].has_flags = 1;
		ve[i].has_status = 1;
		ve[i].start = p->v[i].start;
		ve[i].end = p->v[i].end;
		ve[i].pgoff = p->v[i].pgoff;
		ve[i].shmid = p->v[i].shmid;
		ve[i].prot = p->v[i].prot;
		ve[i].flags = p->v[i].flags;
		ve[i].status = p->v[i].status;
		vp[i] = &ve[i];
	}
	mm.n_vmas = p->nv;
	mm.vmas = vp;
	buf_u32(&b, COMMON_MAGIC);
	buf_u32(&b, MM_MAGIC);
	buf_record(&b, &mm.base);
	blob_add(bs, name, b.p, b.len, 0);
}

static void
blob_files(struct blobs *bs, const struct timg *t)
{
	FileEntry	 fe = FILE_ENTRY__INIT;
	RegFileEntry	 reg = REG_FILE_ENTRY__INIT;
	struct buf	 b = { 0 };
	size_t		 i;

	buf_u32(&b, COMMON_MAGIC);
	buf_u32(&b, FILES_MAGIC);
	for (i = 0; i < t->nf; i++) {
		fe.has_type = fe.has_id = 1;
		fe.type = 1;
		fe.id = t->f[i].id;
		reg.has_id = 1;
		reg.id = t->f[i].id;
		reg.name = (char *)t->f[i].path;
		fe.reg = &reg;
		buf_record(&b, &fe.base);
	}
	blob_add(bs, "files.img", b.p, b.len, 0);
}

/*
 * The CRIU files of t, in the order the image holds them: the small ones,
 * then the pages files.
 */
static void
blobs_build(const struct timg *t, struct blobs *bs)
{
	char	 name[64], text[64];
	size_t	 i;

	memset(bs, 0, sizeof *bs);
	blob_text(bs, "inventory.img", t->inventory);
	for (i = 0; i < t->np; i++) {
		snprintf(name, sizeof name, "core-%d.img", t->p[i].pid);
		snprintf(text, sizeof text, "core of %d", t->p[i].pid);
		blob_text(bs, name, text);
	}
	for (i = 0; i < t->nx; i++)
		blob_text(bs, t->x[i].name, t->x[i].text);
	if (t->nf > 0)
		blob_files(bs, t);
	for (i = 0; i < t->np; i++)
		blob_mm(bs, &t->p[i]);
	for (i = 0; i < t->np; i++) {
		snprintf(name, sizeof name, "pagemap-%d.img", t->p[i].pid);
		blob_pagemap(bs, name, t->p[i].pages_id, &t->p[i].mem);
	}
	for (i = 0; i < t->ns; i++) {
		snprintf(name, sizeof name, "pagemap-shmem-%" PRIu64 ".img",
		    t->s[i].id);
		blob_pagemap(bs, name, t->s[i].pages_id, &t->s[i].mem);
	}
	for (i = 0; i < t->np; i++)
		blob_pages(bs, t->p[i].pages_id, &t->p[i].mem);
	for (i = 0; i < t->ns; i++)
		blob_pages(bs, t->s[i].pages_id, &t->s[i].mem);
}

static void
blobs_free(struct blobs *bs)
{
	size_t	i;

	for (i = 0; i < bs->n; i++)
		free(bs->b[i].data);
	bs->n = 0;
}

/* The manifest of t, whose CRIU files are bs. */
static char *
manifest_text(const struct timg *t, const struct blobs *bs)
{
	json_t		*procs, *cprocs, *cgpus, *files, *argv, *m;
	const struct tproc *p;
	const struct tgpu *g;
	char		*text;
	size_t		 i, j;

	assert_non_null(procs = json_array());
	assert_non_null(cprocs = json_array());
	assert_non_null(cgpus = json_array());
	assert_non_null(files = json_array());
	for (i = 0; i < t->np; i++) {
		p = &t->p[i];
		assert_non_null(argv = json_array());
		for (j = 0; j < 4 && p->argv[j] != NULL; j++)
			json_array_append_new(argv, json_string(p->argv[j]));
		assert_int_equal(json_array_append_new(procs, json_pack(
		    "{s:i, s:i, s:s, s:o, s:i, s:{s:I, s:I, s:I, s:I, s:I}}",
		    "pid", p->pid, "ppid", p->ppid, "comm", p->comm,
		    "cmdline", argv, "threads", p->threads, "memory",
		    "vm_size", (json_int_t)1 << 30, "vm_rss",
		    (json_int_t)p->mem.n * PG, "rss_anon",
		    (json_int_t)p->mem.n * PG, "rss_file", (json_int_t)0,
		    "rss_shmem", (json_int_t)0)), 0);
		if (p->gpu < 0)
			continue;
		assert_int_equal(json_array_append_new(cprocs, json_pack(
		    "{s:i, s:s, s:[{s:s, s:I}]}", "pid", p->pid, "comm",
		    p->comm, "gpus", "uuid", gpus[p->gpu].uuid, "memory",
		    p->gmem)), 0);
	}
	for (i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
		g = &gpus[i];
		assert_int_equal(json_array_append_new(cgpus, json_pack(
		    "{s:i, s:s, s:s, s:s, s:I, s:s}", "index", g->index,
		    "uuid", g->uuid, "name", g->name, "compute_capability",
		    g->cc, "memory", g->memory, "pci_bus_id", g->pci)), 0);
	}
	for (i = 0; i < bs->n; i++)
		assert_int_equal(json_array_append_new(files, json_pack(
		    "{s:s, s:I, s:b}", "name", bs->b[i].name, "size",
		    (json_int_t)bs->b[i].len, "memory", bs->b[i].pages)), 0);
	m = json_pack("{s:i, s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:{s:s}, "
	    "s:{s:i, s:s, s:b, s:o, s:o}, s:i, s:b, s:o, "
	    "s:{s:s, s:i, s:s}, s:I, s:o}",
	    "format", 1,
	    "tool", "gpuckpt 0.1.0",
	    "created", "2026-01-02T03:04:05Z",
	    "host", "hostname", "node1", "kernel", "6.1.0", "arch", "x86_64",
	    "boot_id", "0f0e0d0c-0b0a-0908-0706-050403020100",
	    "criu", "version", "4.1",
	    "cuda", "driver_version", 13000, "cuda_version", "13.0", "nvml", 1,
	    "gpus", cgpus, "processes", cprocs,
	    "root_pid", t->p[0].pid,
	    "shell_job", 0,
	    "processes", procs,
	    "options", "compress", t->level > 0 ? "zstd" : "none", "level",
	    t->level, "after", "kill",
	    "part_size", (json_int_t)t->part,
	    "files", files);
	assert_non_null(m);
	assert_non_null(text = json_dumps(m, JSON_INDENT(2) |
	    JSON_PRESERVE_ORDER));
	json_decref(m);
	return text;
}

/* Adds a CRIU file as the checkpoint does: whole, or in parts. */
static void
add_split(struct gck_ctx *ctx, struct gck_writer *w, const struct blob *b,
    size_t part)
{
	char	 ename[128];
	size_t	 off, n;
	unsigned k;
	int	 r;

	if (b->len <= part) {
		snprintf(ename, sizeof ename, "criu/%s", b->name);
		r = b->pages ? gck_writer_add_pages(w, ename, b->data, b->len) :
		    gck_writer_add(w, ename, b->data, b->len);
		if (r != GCK_OK)
			fail_msg("cannot add '%s': %s", ename,
			    gck_error_string(ctx));
		return;
	}
	for (off = 0, k = 0; off < b->len; off += n, k++) {
		n = b->len - off < part ? b->len - off : part;
		snprintf(ename, sizeof ename, "criu/%s.part%05u", b->name, k);
		r = b->pages ? gck_writer_add_pages(w, ename, b->data + off,
		    n) : gck_writer_add(w, ename, b->data + off, n);
		if (r != GCK_OK)
			fail_msg("cannot add '%s': %s", ename,
			    gck_error_string(ctx));
	}
}

/* Writes the image t into a memory file; returns it, rewound. */
static int
write_image(struct gck_ctx *ctx, const struct timg *t)
{
	struct gck_writer	*w = NULL;
	struct blobs		*bs;
	char			*m;
	size_t			 i;
	int			 fd;

	assert_non_null(bs = malloc(sizeof *bs));
	blobs_build(t, bs);
	m = manifest_text(t, bs);
	assert_int_not_equal(fd = memfd_create("t_inspect", MFD_CLOEXEC), -1);
	if (gck_writer_new2(ctx, fd, t->level, t->part, 1, 0, &w) != GCK_OK ||
	    gck_writer_add(w, "gpuckpt.json", m, strlen(m)) != GCK_OK)
		fail_msg("cannot write an image: %s", gck_error_string(ctx));
	for (i = 0; i < bs->n; i++)
		add_split(ctx, w, &bs->b[i], t->part);
	if (gck_writer_finish(w) != GCK_OK)
		fail_msg("cannot finish an image: %s", gck_error_string(ctx));
	gck_writer_free(w);
	free(m);
	blobs_free(bs);
	free(bs);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/* The diff of a and b, parsed; the diff must succeed. */
static json_t *
diff(struct gck_ctx *ctx, const struct timg *a, const struct timg *b,
    int *differp)
{
	json_error_t	 jerr;
	json_t		*doc;
	char		*text = NULL;
	size_t		 len;
	int		 fda, fdb, r;

	fda = write_image(ctx, a);
	fdb = write_image(ctx, b);
	*differp = -1;
	r = gck_inspect_diff(ctx, fda, "a", fdb, "b", &text, differp);
	if (r != GCK_OK)
		fail_msg("gck_inspect_diff: %d (%s)", r, gck_error_string(ctx));
	close(fda);
	close(fdb);
	assert_non_null(text);
	len = strlen(text);
	assert_true(len > 0 && text[len - 1] == '\n');
	if ((doc = json_loads(text, 0, &jerr)) == NULL)
		fail_msg("the diff is not JSON: %s", jerr.text);
	free(text);
	assert_int_equal(json_integer_value(json_object_get(doc, "schema")),
	    GCK_INSPECT_SCHEMA);
	assert_true(json_is_boolean(json_object_get(doc, "differ")));
	assert_int_equal(json_is_true(json_object_get(doc, "differ")),
	    *differp);
	return doc;
}

/*
 * Diffs image a with b, which is cut to cut bytes when cut is not 0;
 * the diff must fail.  Returns its code.
 */
static int
diff_fails(struct gck_ctx *ctx, const struct timg *b, int cut)
{
	struct timg	 a;
	char		*text = (char *)"unset";
	int		 fda, fdb, r, differ = -1;

	base_image(&a);
	fda = write_image(ctx, &a);
	fdb = write_image(ctx, b);
	if (cut > 0)
		assert_int_equal(ftruncate(fdb, cut), 0);
	r = gck_inspect_diff(ctx, fda, "a", fdb, "b", &text, &differ);
	close(fda);
	close(fdb);
	assert_int_not_equal(r, GCK_OK);
	assert_int_equal(gck_error_code(ctx), r);
	assert_null(text);
	assert_int_equal(differ, 0);
	assert_non_null(gck_error_string(ctx));
	assert_true(*gck_error_string(ctx) != '\0');
	return r;
}

static json_t *
hexaddr(uint64_t v)
{
	char	buf[24];

	snprintf(buf, sizeof buf, "0x%" PRIx64, v);
	return json_string(buf);
}

/* A mapping as the diff should describe it. */
static json_t *
want_vma(uint64_t start, uint64_t end, const char *prot, const char *kind,
    const char *path, const char *status, uint64_t changed)
{
	json_t	*o;

	o = json_pack("{s:o, s:o, s:I, s:s, s:s, s:o, s:s, s:I}", "start",
	    hexaddr(start), "end", hexaddr(end), "size",
	    (json_int_t)(end - start), "prot", prot, "kind", kind, "path",
	    path != NULL ? json_string(path) : json_null(), "status", status,
	    "changed", (json_int_t)changed);
	assert_non_null(o);
	return o;
}

/* A process's use of GPU g, as the diff should describe it. */
static json_t *
want_gpu(int g, json_int_t memory)
{
	json_t	*o;

	o = json_pack("{s:s, s:I, s:i, s:s, s:s}", "uuid", gpus[g].uuid,
	    "memory", memory, "index", gpus[g].index, "name", gpus[g].name,
	    "storage", "host");
	assert_non_null(o);
	return o;
}

static json_t *
want_memory(json_int_t a, json_int_t b, json_int_t changed)
{
	return json_pack("{s:I, s:I, s:I}", "a", a, "b", b, "changed",
	    changed);
}

/* Fails unless got equals want, which it consumes. */
static void
check_json(json_t *got, json_t *want, const char *what, int line)
{
	char	*g, *w;

	assert_non_null(want);
	if (got != NULL && json_equal(got, want)) {
		json_decref(want);
		return;
	}
	g = got != NULL ? json_dumps(got, JSON_SORT_KEYS) : NULL;
	w = json_dumps(want, JSON_SORT_KEYS);
	fail_msg("line %d: %s:\n got  %s\n want %s", line, what,
	    g != NULL ? g : "(none)", w);
}

/* Fails unless the array arr holds exactly the strings given, in order. */
static void
check_strings(int line, json_t *arr, const char *what, ...)
{
	json_t		*want;
	const char	*s;
	va_list		 ap;

	assert_non_null(want = json_array());
	va_start(ap, what);
	while ((s = va_arg(ap, const char *)) != NULL)
		json_array_append_new(want, json_string(s));
	va_end(ap);
	check_json(arr, want, what, line);
}

/* The entry of processes.changed for pid, or NULL. */
static json_t *
changed_proc(json_t *doc, int pid)
{
	json_t	*p;
	size_t	 i;

	json_array_foreach(json_object_get(json_object_get(doc, "processes"),
	    "changed"), i, p)
		if (json_integer_value(json_object_get(p, "pid")) == pid)
			return p;
	return NULL;
}

static void
expect_no_process_change(json_t *doc)
{
	json_t	*ps = json_object_get(doc, "processes");

	expect_json(json_object_get(ps, "added"), json_array(),
	    "processes.added");
	expect_json(json_object_get(ps, "removed"), json_array(),
	    "processes.removed");
	expect_json(json_object_get(ps, "changed"), json_array(),
	    "processes.changed");
}

/* The number of CRIU files of the base image. */
#define BASE_FILES	12

static void
test_identical(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a;
	json_t		*doc, *files, *im;
	int		 differ;

	base_image(&a);
	doc = diff(ctx, &a, &a, &differ);
	assert_int_equal(differ, 0);
	expect_no_process_change(doc);
	files = json_object_get(doc, "files");
	expect_strings(json_object_get(files, "changed"), "files.changed",
	    NULL);
	expect_strings(json_object_get(files, "added"), "files.added", NULL);
	expect_strings(json_object_get(files, "removed"), "files.removed",
	    NULL);
	assert_int_equal(json_integer_value(json_object_get(files, "same")),
	    BASE_FILES);
	im = json_object_get(doc, "images");
	expect_json(json_object_get(im, "a"), json_pack("{s:s, s:s, s:s, "
	    "s:s, s:s, s:i, s:i}", "name", "a", "created",
	    "2026-01-02T03:04:05Z", "hostname", "node1", "kernel", "6.1.0",
	    "tool", "gpuckpt 0.1.0", "root_pid", 100, "processes", 2),
	    "images.a");
	assert_string_equal(json_string_value(json_object_get(
	    json_object_get(im, "b"), "name")), "b");
	json_decref(doc);
}

/* Parts that are not a whole number of pages, compressed. */
static void
test_identical_odd_parts(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	a.part = ODD_PART;
	a.level = 3;
	doc = diff(ctx, &a, &a, &differ);
	assert_int_equal(differ, 0);
	expect_no_process_change(doc);
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "changed"), "files.changed", NULL);
	json_decref(doc);
}

static void
test_page_changed(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc, *files;
	int		 differ;

	base_image(&a);
	b = a;
	page_set(&tproc(&b, 100)->mem, ANON_START + 2 * PG, 99);
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:[o], s:o}]", "pid", 100,
	    "comm", "server", "mappings", want_vma(ANON_START, ANON_START +
	    8 * PG, "rw-p", "anon", NULL, "changed", PG), "memory",
	    want_memory(SERVER_PAGES * PG, SERVER_PAGES * PG, PG)),
	    "processes.changed");
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "added"), json_array(), "processes.added");
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "removed"), json_array(), "processes.removed");
	files = json_object_get(doc, "files");
	expect_strings(json_object_get(files, "changed"), "files.changed",
	    "pages-1.img", NULL);
	expect_strings(json_object_get(files, "added"), "files.added", NULL);
	expect_strings(json_object_get(files, "removed"), "files.removed",
	    NULL);
	assert_int_equal(json_integer_value(json_object_get(files, "same")),
	    BASE_FILES - 1);
	json_decref(doc);
}

/* A page of a file mapping and one of the heap; a zero page now not. */
static void
test_page_changed_kinds(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	page_set(&tproc(&b, 100)->mem, TEXT_START, 77);
	page_set(&tproc(&b, 100)->mem, HEAP_START + PG, 78);
	page_set(&tproc(&b, 101)->mem, WANON_START + PG, 79);
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(changed_proc(doc, 100), json_pack("{s:i, s:s, s:[o, o], "
	    "s:o}", "pid", 100, "comm", "server", "mappings",
	    want_vma(TEXT_START, TEXT_START + 2 * PG, "r-xp", "file",
	    "/usr/bin/server", "changed", PG),
	    want_vma(HEAP_START, HEAP_START + 4 * PG, "rw-p", "heap", NULL,
	    "changed", PG), "memory", want_memory(SERVER_PAGES * PG,
	    SERVER_PAGES * PG, 2 * PG)), "process 100");
	expect_json(changed_proc(doc, 101), json_pack("{s:i, s:s, s:[o], "
	    "s:o}", "pid", 101, "comm", "worker", "mappings",
	    want_vma(WANON_START, WANON_START + 2 * PG, "rw-p", "anon", NULL,
	    "changed", PG), "memory", want_memory(2 * PG, 2 * PG, PG)),
	    "process 101");
	assert_int_equal(json_array_size(json_object_get(json_object_get(doc,
	    "processes"), "changed")), 2);
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "changed"), "files.changed", "pages-1.img", "pages-2.img", NULL);
	json_decref(doc);
}

/* Parts of 6000 bytes, compressed: the changed page straddles two. */
static void
test_page_changed_across_parts(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	a.part = ODD_PART;
	a.level = 3;
	b = a;
	/* the 5th page of pages-1.img: bytes [16384, 20480) */
	page_set(&tproc(&b, 100)->mem, HEAP_START + 3 * PG, 88);
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:[o], s:o}]", "pid", 100,
	    "comm", "server", "mappings", want_vma(HEAP_START, HEAP_START +
	    4 * PG, "rw-p", "heap", NULL, "changed", PG), "memory",
	    want_memory(SERVER_PAGES * PG, SERVER_PAGES * PG, PG)),
	    "processes.changed");
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "changed"), "files.changed", "pages-1.img", NULL);
	json_decref(doc);
}

/*
 * Pages that b's pagemap no longer lists: changed unless a's page was
 * zeros.  Either way round, as a page that only b lists.
 */
static void
test_page_dropped(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	a.level = 3;
	b = a;
	page_drop(&tproc(&b, 100)->mem, HEAP_START + PG);	/* zeros */
	page_drop(&tproc(&b, 100)->mem, HEAP_START + 2 * PG);
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:[o], s:o}]", "pid", 100,
	    "comm", "server", "mappings", want_vma(HEAP_START, HEAP_START +
	    4 * PG, "rw-p", "heap", NULL, "changed", PG), "memory",
	    want_memory(SERVER_PAGES * PG, (SERVER_PAGES - 2) * PG, PG)),
	    "processes.changed");
	json_decref(doc);

	doc = diff(ctx, &b, &a, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:[o], s:o}]", "pid", 100,
	    "comm", "server", "mappings", want_vma(HEAP_START, HEAP_START +
	    4 * PG, "rw-p", "heap", NULL, "changed", PG), "memory",
	    want_memory((SERVER_PAGES - 2) * PG, SERVER_PAGES * PG, PG)),
	    "processes.changed (b, a)");
	json_decref(doc);
}

/* Only a zero page dropped: the memory is the same, the files are not. */
static void
test_zero_page_dropped(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	page_drop(&tproc(&b, 100)->mem, ANON_START + 3 * PG);
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_no_process_change(doc);
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "changed"), "files.changed", "pagemap-100.img", "pages-1.img",
	    NULL);
	json_decref(doc);
}

/*
 * A mapping added, one removed, one grown, one made read-only: b's in
 * address order, then those only a has.
 */
static void
test_mappings(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct tproc	*p;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	p = tproc(&b, 100);
	vma_drop(p, LIB_START);
	vma_add(p, &(struct tvma){ NEW_START, NEW_START + 2 * PG, 0, 0, 3,
	    0x22, VMA_REGULAR | VMA_ANON_PRIV });
	page_add(&p->mem, NEW_START, 50);
	page_add(&p->mem, NEW_START + PG, 0);
	vma_get(p, HEAP_START)->end = HEAP_START + 6 * PG;
	page_add(&p->mem, HEAP_START + 4 * PG, 51);
	vma_get(p, ANON_START)->prot = 1;
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:[o, o, o, o], s:o}]", "pid",
	    100, "comm", "server", "mappings",
	    want_vma(HEAP_START, HEAP_START + 6 * PG, "rw-p", "heap", NULL,
	    "resized", PG),
	    want_vma(ANON_START, ANON_START + 8 * PG, "r--p", "anon", NULL,
	    "protection", 0),
	    want_vma(NEW_START, NEW_START + 2 * PG, "rw-p", "anon", NULL,
	    "added", PG),
	    want_vma(LIB_START, LIB_START + PG, "r--p", "file",
	    "/usr/lib/libgpu.so", "removed", 0),
	    "memory", want_memory(SERVER_PAGES * PG, (SERVER_PAGES + 3) * PG,
	    2 * PG)), "processes.changed");
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "changed"), "files.changed", "mm-100.img", "pagemap-100.img",
	    "pages-1.img", NULL);
	json_decref(doc);
}

/*
 * An image without files.img (a tree with no open files): its file
 * mappings are described without a path.
 */
static void
test_mapping_no_files(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	b.nf = 0;
	vma_get(tproc(&b, 100), LIB_START)->prot = 5;
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(changed_proc(doc, 100), "mappings"),
	    json_pack("[o]", want_vma(LIB_START, LIB_START + PG, "r-xp",
	    "file", NULL, "protection", 0)), "mappings");
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "removed"), "files.removed", "files.img", NULL);
	json_decref(doc);
}

/*
 * The heap shrunk by two pages that held data: those bytes changed, and
 * the resized mapping accounts for them.
 */
static void
test_mapping_shrunk(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct tproc	*p;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	p = tproc(&b, 100);
	vma_get(p, HEAP_START)->end = HEAP_START + 2 * PG;
	page_drop(&p->mem, HEAP_START + 2 * PG);
	page_drop(&p->mem, HEAP_START + 3 * PG);
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:[o], s:o}]", "pid", 100,
	    "comm", "server", "mappings",
	    want_vma(HEAP_START, HEAP_START + 2 * PG, "rw-p", "heap", NULL,
	    "resized", 2 * PG),
	    "memory", want_memory(SERVER_PAGES * PG, (SERVER_PAGES - 2) * PG,
	    2 * PG)), "processes.changed: a shrunk mapping counts the pages it lost");
	json_decref(doc);
}

/*
 * A page of the shared segment: it counts for each mapping whose window
 * (pgoff, size) holds it.  The server maps offsets [0, 4 PG), the
 * worker [PG, 3 PG).
 */
static void
test_shared_memory(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc, *server, *worker;
	int		 differ;

	base_image(&a);
	b = a;
	page_set(&tshm(&b, SHMID)->mem, PG, 97);
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	server = json_pack("{s:i, s:s, s:[o], s:o}", "pid", 100, "comm",
	    "server", "mappings", want_vma(SHM_START, SHM_START + 4 * PG,
	    "rw-s", "shared", NULL, "changed", PG), "memory",
	    want_memory(SERVER_PAGES * PG, SERVER_PAGES * PG, PG));
	worker = json_pack("{s:i, s:s, s:[o], s:o}", "pid", 101, "comm",
	    "worker", "mappings", want_vma(WSHM_START, WSHM_START + 2 * PG,
	    "rw-s", "shared", NULL, "changed", PG), "memory",
	    want_memory(2 * PG, 2 * PG, PG));
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[o, o]", server, worker),
	    "processes.changed");
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "changed"), "files.changed", "pages-3.img", NULL);
	json_decref(doc);

	/* offsets 0 and 3 PG: outside the worker's window */
	b = a;
	page_set(&tshm(&b, SHMID)->mem, 0, 96);
	page_set(&tshm(&b, SHMID)->mem, 3 * PG, 0);
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:[o], s:o}]", "pid", 100,
	    "comm", "server", "mappings", want_vma(SHM_START, SHM_START +
	    4 * PG, "rw-s", "shared", NULL, "changed", 2 * PG), "memory",
	    want_memory(SERVER_PAGES * PG, SERVER_PAGES * PG, 2 * PG)),
	    "processes.changed (outside the worker's window)");
	json_decref(doc);
}

static void
test_processes_added_removed(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct tproc	*p;
	struct timg	 a, b;
	json_t		*doc, *ps, *files;
	int		 differ;

	base_image(&a);
	b = a;
	p = &b.p[1];			/* the worker, 101, goes */
	memset(p, 0, sizeof *p);
	p->pid = 102;
	p->ppid = 100;
	p->comm = "helper";
	p->argv[0] = "helper";
	p->argv[1] = "-x";
	p->threads = 3;
	p->gpu = 1;
	p->gmem = 536870912;
	p->pages_id = 4;
	p->v[p->nv++] = (struct tvma){ WANON_START, WANON_START + PG, 0, 0, 3,
	    0x22, VMA_REGULAR | VMA_ANON_PRIV };
	page_add(&p->mem, WANON_START, 60);
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	ps = json_object_get(doc, "processes");
	expect_json(json_object_get(ps, "added"), json_pack("[{s:i, s:s, "
	    "s:[s, s], s:i, s:[o]}]", "pid", 102, "comm", "helper", "cmdline",
	    "helper", "-x", "threads", 3, "gpus", want_gpu(1, 536870912)),
	    "processes.added");
	expect_json(json_object_get(ps, "removed"), json_pack("[{s:i, s:s, "
	    "s:[s], s:i, s:[]}]", "pid", 101, "comm", "worker", "cmdline",
	    "worker", "threads", 1, "gpus"), "processes.removed");
	expect_json(json_object_get(ps, "changed"), json_array(),
	    "processes.changed");
	files = json_object_get(doc, "files");
	expect_strings(json_object_get(files, "changed"), "files.changed",
	    NULL);
	expect_strings(json_object_get(files, "added"), "files.added",
	    "core-102.img", "mm-102.img", "pagemap-102.img", "pages-4.img",
	    NULL);
	expect_strings(json_object_get(files, "removed"), "files.removed",
	    "core-101.img", "mm-101.img", "pagemap-101.img", "pages-2.img",
	    NULL);
	assert_int_equal(json_integer_value(json_object_get(files, "same")),
	    BASE_FILES - 4);
	json_decref(doc);
}

static void
test_process_cmdline(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	tproc(&b, 100)->argv[2] = "8080";
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:{s:[s, s, s], s:[s, s, s]}, "
	    "s:[], s:o}]", "pid", 100, "comm", "server", "cmdline",
	    "a", "server", "--port", "80", "b", "server", "--port", "8080",
	    "mappings", "memory", want_memory(SERVER_PAGES * PG,
	    SERVER_PAGES * PG, 0)), "processes.changed");
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "changed"), "files.changed", NULL);
	json_decref(doc);
}

static void
test_process_threads(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	tproc(&b, 101)->threads = 5;
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:{s:i, s:i}, s:[], s:o}]",
	    "pid", 101, "comm", "worker", "threads", "a", 1, "b", 5,
	    "mappings", "memory", want_memory(2 * PG, 2 * PG, 0)),
	    "processes.changed");
	json_decref(doc);
}

/* Another GPU, then as much memory on another GPU, then on none. */
static void
test_process_gpus(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	tproc(&b, 100)->gpu = 1;
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:{s:[o], s:[o]}, s:[], s:o}]",
	    "pid", 100, "comm", "server", "gpus", "a",
	    want_gpu(0, 1073741824), "b", want_gpu(1, 1073741824),
	    "mappings", "memory", want_memory(SERVER_PAGES * PG,
	    SERVER_PAGES * PG, 0)), "processes.changed (uuid)");
	json_decref(doc);

	b = a;
	tproc(&b, 100)->gmem = 2147483648;
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:{s:[o], s:[o]}, s:[], s:o}]",
	    "pid", 100, "comm", "server", "gpus", "a",
	    want_gpu(0, 1073741824), "b", want_gpu(0, 2147483648),
	    "mappings", "memory", want_memory(SERVER_PAGES * PG,
	    SERVER_PAGES * PG, 0)), "processes.changed (memory)");
	json_decref(doc);

	b = a;
	tproc(&b, 100)->gpu = -1;
	doc = diff(ctx, &a, &b, &differ);
	assert_int_equal(differ, 1);
	expect_json(json_object_get(json_object_get(doc, "processes"),
	    "changed"), json_pack("[{s:i, s:s, s:{s:[o], s:[]}, s:[], s:o}]",
	    "pid", 100, "comm", "server", "gpus", "a",
	    want_gpu(0, 1073741824), "b", "mappings", "memory",
	    want_memory(SERVER_PAGES * PG, SERVER_PAGES * PG, 0)),
	    "processes.changed (no GPU)");
	json_decref(doc);
}

/*
 * CRIU files: one rewritten at the same size, one at another, one only
 * in a, one only in b.
 */
static void
test_files(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc, *files;
	int		 differ;

	base_image(&a);
	b = a;
	a.x[a.nx++] = (struct textra){ "fs-100.img", "fs of 100, take 1" };
	a.x[a.nx++] = (struct textra){ "tty-info.img", "a tty" };
	a.x[a.nx++] = (struct textra){ "fs-101.img", "fs of 101" };
	b.x[b.nx++] = (struct textra){ "fs-100.img", "fs of 100, take 2" };
	b.x[b.nx++] = (struct textra){ "seccomp.img", "filters" };
	b.x[b.nx++] = (struct textra){ "fs-101.img", "fs of 101, longer" };
	doc = diff(ctx, &a, &b, &differ);
	expect_no_process_change(doc);
	files = json_object_get(doc, "files");
	expect_strings(json_object_get(files, "changed"), "files.changed",
	    "fs-100.img", "fs-101.img", NULL);
	expect_strings(json_object_get(files, "added"), "files.added",
	    "seccomp.img", NULL);
	expect_strings(json_object_get(files, "removed"), "files.removed",
	    "tty-info.img", NULL);
	assert_int_equal(json_integer_value(json_object_get(files, "same")),
	    BASE_FILES);
	json_decref(doc);
}

/* Images whose processes are alike but whose CRIU files are not differ. */
static void
test_differ_files_only(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	b.inventory = "inventory of the tree, again";
	doc = diff(ctx, &a, &b, &differ);
	expect_no_process_change(doc);
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "changed"), "files.changed", "inventory.img", NULL);
	assert_int_equal(differ, 1);
	json_decref(doc);
}

/*
 * The same files, split at another part size: their bytes are the same,
 * so none has changed.
 */
static void
test_part_size_only(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 a, b;
	json_t		*doc;
	int		 differ;

	base_image(&a);
	b = a;
	b.part = ODD_PART;
	doc = diff(ctx, &a, &b, &differ);
	expect_no_process_change(doc);
	expect_strings(json_object_get(json_object_get(doc, "files"),
	    "changed"), "files.changed: the same bytes in other parts", NULL);
	assert_int_equal(differ, 0);
	json_decref(doc);
}

/* b cut short, inside its manifest, its pages and its trailer. */
static void
test_truncated(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 b;
	struct stat	 st;
	int		 fd, r, cuts[4];
	size_t		 i;

	base_image(&b);
	fd = write_image(ctx, &b);
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	cuts[0] = 700;
	cuts[1] = (int)st.st_size / 2;
	cuts[2] = (int)st.st_size - 10240 - 512;
	cuts[3] = (int)st.st_size - 512;
	for (i = 0; i < 4; i++) {
		r = diff_fails(ctx, &b, cuts[i]);
		if (r != GCK_ETRUNC && r != GCK_EFORMAT)
			fail_msg("cut at %d: %d (%s)", cuts[i], r,
			    gck_error_string(ctx));
	}
}

/* A pagemap listing more pages than its pages file holds. */
static void
test_pagemap_overruns(void **state)
{
	struct gck_ctx	*ctx = *state;
	struct timg	 b;

	base_image(&b);
	tproc(&b, 100)->mem.extra = 2;
	assert_int_equal(diff_fails(ctx, &b, 0), GCK_EFORMAT);
	assert_string_equal(gck_error_string(ctx), "corrupt image: "
	    "'pagemap-100.img' lists more pages than its pages file holds");

	base_image(&b);
	tshm(&b, SHMID)->mem.extra = 1;
	assert_int_equal(diff_fails(ctx, &b, 0), GCK_EFORMAT);
	assert_string_equal(gck_error_string(ctx), "corrupt image: "
	    "'pagemap-shmem-85.img' lists more pages than its pages file "
	    "holds");
}

static void
test_mm_garbage(void **state)
{
	static const char	 junk[] = "this is not an mm image at all";
	static const uint32_t	 cut[3] = { COMMON_MAGIC, MM_MAGIC, 1000 };
	struct gck_ctx		*ctx = *state;
	struct timg		 b;

	base_image(&b);
	tproc(&b, 100)->mm = junk;
	tproc(&b, 100)->mmlen = sizeof junk - 1;
	assert_int_equal(diff_fails(ctx, &b, 0), GCK_EFORMAT);
	if (strstr(gck_error_string(ctx), "'mm-100.img'") == NULL)
		fail_msg("'%s' does not name mm-100.img",
		    gck_error_string(ctx));

	/* the right magic numbers, then a record longer than the file */
	base_image(&b);
	tproc(&b, 101)->mm = (const char *)cut;
	tproc(&b, 101)->mmlen = sizeof cut;
	assert_int_equal(diff_fails(ctx, &b, 0), GCK_EFORMAT);
	if (strstr(gck_error_string(ctx), "'mm-101.img'") == NULL)
		fail_msg("'%s' does not name mm-101.img",
		    gck_error_string(ctx));
}

/*
 * The summary's totals of a manifest whose numbers add up beyond what
 * a JSON integer holds stop at the largest one.
 */
static void
test_show_totals_bounded(void **state)
{
	static const char	 m[] =
	    "{\"format\": 1, \"root_pid\": 1, \"processes\": ["
	    "{\"pid\": 1, \"threads\": 9223372036854775807, \"memory\": "
	    "{\"vm_rss\": 9223372036854775807}},"
	    "{\"pid\": 2, \"threads\": 9223372036854775807, \"memory\": "
	    "{\"vm_rss\": 9223372036854775807}}],"
	    "\"files\": [{\"name\": \"a.img\", \"size\": "
	    "9223372036854775807, \"memory\": true}, {\"name\": \"b.img\", "
	    "\"size\": 9223372036854775807, \"memory\": true}]}";
	struct gck_ctx		*ctx = *state;
	struct gck_writer	*w = NULL;
	json_t			*doc, *tot, *img;
	char			*text = NULL;
	int			 fd;

	assert_int_not_equal(fd = memfd_create("t_inspect", MFD_CLOEXEC), -1);
	assert_int_equal(gck_writer_new2(ctx, fd, 0, 0, 1, 0, &w), GCK_OK);
	assert_int_equal(gck_writer_add(w, "gpuckpt.json", m, strlen(m)),
	    GCK_OK);
	assert_int_equal(gck_writer_finish(w), GCK_OK);
	gck_writer_free(w);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(gck_inspect_show(ctx, fd, &text), GCK_OK);
	close(fd);
	assert_non_null(doc = json_loads(text, 0, NULL));
	free(text);
	tot = json_object_get(doc, "totals");
	img = json_object_get(doc, "image");
	assert_true(json_integer_value(json_object_get(tot, "threads")) ==
	    LLONG_MAX);
	assert_true(json_integer_value(json_object_get(tot, "vm_rss")) ==
	    LLONG_MAX);
	assert_true(json_integer_value(json_object_get(img, "data_size")) ==
	    LLONG_MAX);
	assert_true(json_integer_value(json_object_get(img,
	    "memory_size")) == LLONG_MAX);
	json_decref(doc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		unit_ctx_test(test_identical),
		unit_ctx_test(test_identical_odd_parts),
		unit_ctx_test(test_page_changed),
		unit_ctx_test(test_page_changed_kinds),
		unit_ctx_test(test_page_changed_across_parts),
		unit_ctx_test(test_page_dropped),
		unit_ctx_test(test_zero_page_dropped),
		unit_ctx_test(test_mappings),
		unit_ctx_test(test_mapping_shrunk),
		unit_ctx_test(test_mapping_no_files),
		unit_ctx_test(test_shared_memory),
		unit_ctx_test(test_processes_added_removed),
		unit_ctx_test(test_process_cmdline),
		unit_ctx_test(test_process_threads),
		unit_ctx_test(test_process_gpus),
		unit_ctx_test(test_files),
		unit_ctx_test(test_differ_files_only),
		unit_ctx_test(test_part_size_only),
		unit_ctx_test(test_truncated),
		unit_ctx_test(test_pagemap_overruns),
		unit_ctx_test(test_mm_garbage),
		unit_ctx_test(test_show_totals_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
