#ifndef GCK_CRIU_PAGEMAP_H
#define GCK_CRIU_PAGEMAP_H

struct gck_capture;
struct gck_ctx;
struct gck_nsview;
struct gck_pmread;
struct gck_sfile;

/* pagemap.c: CRIU's images, and a task's memory as its pagemap lists it */
#define GCK_IMG_COMMON_MAGIC	0x54564319u	/* CRIU's image header */
#define GCK_CORE_MAGIC		0x55053847u	/* core-TID.img */
#define GCK_FILES_MAGIC		0x56303138u	/* files.img */
#define GCK_MM_MAGIC		0x57492820u	/* mm-PID.img */
#define GCK_PAGEMAP_MAGIC	0x56084025u	/* pagemap-PID.img */

/* The flags of a pagemap entry */
#define GCK_PE_PARENT		(1u << 0)	/* in the parent image */
#define GCK_PE_LAZY		(1u << 1)	/* may be served lazily */
#define GCK_PE_PRESENT		(1u << 2)	/* in the pages file */
/* An entry of pages in the pages file, lazy or not: it may lose some. */
#define GCK_PE_SPLITS(flags)	(((flags) & ~GCK_PE_LAZY) == GCK_PE_PRESENT)

/* A mapping's status in mm-PID.img (CRIU's criu/include/image.h). */
#define GCK_VMA_AREA_REGULAR	(1u << 0)
#define GCK_VMA_AREA_STACK	(1u << 1)
#define GCK_VMA_AREA_HEAP	(1u << 5)
#define GCK_VMA_ANON_PRIVATE	(1u << 9)

struct VmaEntry;

int	gck_img_start(const char *, size_t, uint32_t, size_t *);
const uint8_t *gck_img_first(const char *, size_t, uint32_t, uint32_t *);
int	gck_vma_anon_private(const struct VmaEntry *);
const uint8_t *gck_img_record(const char *, size_t, size_t *, uint32_t *,
	    int *);
/* A record of a CRIU image, given back as it is to be (gck_img_rewrite) */
typedef int	(*gck_img_rec_fn)(struct gck_ctx *, const uint8_t *, size_t,
		    void *, uint8_t **, size_t *);
int	gck_img_rewrite(struct gck_ctx *, struct gck_capture *,
	    const struct gck_sfile *, void *, gck_img_rec_fn);

/* A pagemap image, read an entry at a time. */
struct gck_pagemap {
	const char	*data;
	size_t		 len, pos;
	unsigned	 pages_id;	/* its pages file: pages-ID.img */
};

/*
 * The most pages one entry of a pagemap may list (2^36 pages: 256 TiB of
 * 4 KiB pages), so that a count times the page size never overflows.
 */
#define GCK_PE_MAX_PAGES	(UINT64_C(1) << 36)

/* One entry: nr_pages pages at vaddr. */
struct gck_pmentry {
	uint64_t	 vaddr;
	uint64_t	 nr_pages;
	uint32_t	 flags;		/* GCK_PE_* */
};

int	gck_pagemap_open(struct gck_pagemap *, const char *, size_t);
int	gck_pagemap_next(struct gck_pagemap *, struct gck_pmentry *);
int	gck_pagemap_without(struct gck_ctx *, const struct gck_sfile *,
	    const uint8_t *, char **, size_t *);


int	gck_pmread_open(struct gck_ctx *, const struct gck_sfile *,
	    const struct gck_sfile *, pid_t, struct gck_pmread **);
ssize_t	gck_pmread_read(struct gck_pmread *, void *, size_t);
int	gck_pmread_error(const struct gck_pmread *);
int	gck_pmread_vma_cuts(const struct gck_pmread *,
	    const struct gck_sfile *, uint64_t **, size_t *);
int	gck_pmread_overlaps(const struct gck_pmread *, uint64_t, uint64_t,
	    uint64_t, uint64_t);

struct gck_area {
	uint64_t	addr, size;
};

int	gck_rseq_areas(struct gck_ctx *, const struct gck_capture *, pid_t,
	    const struct gck_nsview *, struct gck_area **, size_t *);
void	gck_pmread_free(struct gck_pmread *);

#endif /* GCK_CRIU_PAGEMAP_H */
