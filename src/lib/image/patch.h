#ifndef GCK_IMAGE_PATCH_H
#define GCK_IMAGE_PATCH_H

#include <stddef.h>
#include <stdint.h>

#include "image/digest.h"

/*
 * patch.c: memory at the granularity of the page (format 3,
 * gpuckpt-image(5), "Page index" and "Patches").
 *
 * Every page of an image's memory has a fast digest, XXH3-128, listed
 * in the image's page index; a writer given the index of the images it
 * may refer to finds in it, page by page, what they hold already, and
 * writes a chunk most of whose pages they hold as a patch: runs of
 * pages of their chunks (its bases), of zeros, and of the pages it
 * stores.
 */
#define GCK_PAGE		4096u
#define GCK_PDIG		16u	/* bytes of a page's digest */
#define GCK_PATCH_BASES		16	/* bases of a patch, at most */
#define GCK_PATCH_RUNS		256	/* runs of a patch, at most */
#define GCK_PATCH_MAP_MAX	16384	/* bytes of its map, at most */
#define GCK_PIDX_PART		(1u << 20)	/* digests in a part of the
						   page index */

#define GCK_RUN_BASE	'B'		/* pages of a base */
#define GCK_RUN_STORED	'S'		/* pages the patch stores */
#define GCK_RUN_ZERO	'Z'		/* zeros */

#define GCK_PLAN_FULL	0		/* gck_patch_plan(): store it whole */
#define GCK_PLAN_REF	1		/* a reference to a chunk */
#define GCK_PLAN_PATCH	2		/* a patch */

struct gck_prun {
	int		 kind;		/* GCK_RUN_* */
	uint32_t	 count;		/* pages */
	uint32_t	 base;		/* GCK_RUN_BASE: which, */
	uint32_t	 page;		/* and from its page */
};

/* A chunk as a patch: what its map says. */
struct gck_patch {
	size_t		 nbase;
	struct gck_digest base[GCK_PATCH_BASES];
	uint64_t	 bsize[GCK_PATCH_BASES];
	size_t		 nrun;
	struct gck_prun	 run[GCK_PATCH_RUNS];
	uint64_t	 size;		/* the chunk's bytes */
	uint64_t	 stored;	/* the bytes of pages it stores */
};

/* A base a writer may name: a chunk of an image it may refer to. */
struct gck_pbase {
	struct gck_digest d;
	uint64_t	 size;
	uint64_t	 first;		/* the number of its first page */
};

/* The pages of the images a writer may refer to, by their digests. */
struct gck_pseq {
	uint64_t	 h;		/* XXH3 of the pages' digests */
	size_t		 ent;
};

struct gck_ptab {
	unsigned char	*dig;		/* GCK_PDIG bytes a page */
	uint64_t	 npages, cappages;
	struct gck_pbase *ent;
	size_t		 nent, capent;
	size_t		*byd;		/* the entries, by digest */
	struct gck_pseq	*seq;		/* and by their pages' digests */
	uint32_t	*slot;		/* page number + 1; 0: empty */
	uint64_t	 mask;
};

void	gck_page_digest(const void *, unsigned char *);
const unsigned char *gck_page_zero_digest(void);
void	gck_ptab_init(struct gck_ptab *);
void	gck_ptab_clear(struct gck_ptab *);
int	gck_ptab_add(struct gck_ptab *, const struct gck_digest *, uint64_t,
	    const unsigned char *);
int	gck_ptab_build(struct gck_ptab *);
int	gck_ptab_find(const struct gck_ptab *, const unsigned char *,
	    size_t *, uint32_t *);
const unsigned char *gck_ptab_pages(const struct gck_ptab *,
	    const struct gck_digest *, uint64_t);
int	gck_patch_plan(const struct gck_ptab *, const unsigned char *,
	    const unsigned char *, size_t, struct gck_patch *, size_t *);
int	gck_patch_text(const struct gck_patch *, char *, size_t);
int	gck_patch_parse(const char *, size_t, uint64_t, uint64_t,
	    struct gck_patch *, char *, size_t);
int	gck_patch_digest(const void *, size_t, const char *, size_t,
	    uint64_t, struct gck_digest *);

#endif /* GCK_IMAGE_PATCH_H */
