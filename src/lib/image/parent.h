#ifndef GCK_IMAGE_PARENT_H
#define GCK_IMAGE_PARENT_H

#include "image/digest.h"

struct gck_ctx;
struct gck_digest;
struct gck_manifest;
struct gck_parents;
struct json_t;

/*
 * parent.c: the images an incremental image refers to, read by their
 * trailer, found from the end of their file.
 */

/* An entry of an image's trailer. */
struct gck_tentry {
	const char	*name;
	uint64_t	 size;
	struct gck_digest d;
	int		 ref;		/* a reference to a parent's chunk */
	uint64_t	 at, zsize;	/* its frame */
};

int	gck_parents_new(struct gck_ctx *, struct gck_parents **);
int	gck_parents_add(struct gck_parents *, const char *);
int	gck_parents_base(struct gck_parents *, const char *);
int	gck_parents_resolve(struct gck_parents *, const struct gck_manifest *);
int	gck_parents_has(const struct gck_parents *, const struct gck_digest *);
int	gck_parents_load(const struct gck_parents *, const struct gck_digest *,
	    uint64_t, char **, size_t *, size_t *);
void	gck_parents_note(struct gck_parents *, size_t, uint64_t);
int	gck_parents_fetch(struct gck_parents *, const struct gck_digest *,
	    uint64_t, const char **);
struct json_t *gck_parents_json(const struct gck_parents *);
size_t	gck_parents_count(const struct gck_parents *);
const char *gck_parents_path(const struct gck_parents *, size_t);
const char *gck_parents_id(const struct gck_parents *, size_t);
int	gck_parents_open(struct gck_ctx *, const struct gck_manifest *,
	    char *const *, size_t, struct gck_parents **);
int	gck_parents_sizes(struct gck_ctx *, int, const char *, uint64_t *,
	    uint64_t *);
int	gck_parents_self(struct gck_ctx *, int, const char *,
	    struct gck_parents **);
int	gck_image_tail(struct gck_ctx *, int, const char *, char **, size_t *,
	    char **, size_t *);
size_t	gck_parents_nentries(const struct gck_parents *);
int	gck_parents_entry(const struct gck_parents *, size_t,
	    struct gck_tentry *);
int	gck_parents_pool_add(struct gck_parents *, const char *);
int	gck_parents_pool_parent(struct gck_parents *, const char *);
void	gck_parents_pool_done(struct gck_parents *);
ssize_t	gck_parents_pool_orphan(const struct gck_parents *);
int	gck_parents_pool_covered(const struct gck_parents *,
	    const unsigned char *);
int	gck_parents_pool_offer(struct gck_parents *);
int	gck_parents_pool_digests(const struct gck_parents *,
	    struct gck_digest **, size_t *);
int	gck_parents_pool_check(struct gck_parents *,
	    const struct gck_manifest *);
const char *gck_parents_bad(const struct gck_parents *);
uint64_t gck_parents_used(const struct gck_parents *, size_t);
int	gck_parents_remote(struct gck_ctx *, struct json_t *,
	    struct gck_digest *, size_t, struct gck_parents **);
void	gck_parents_free(struct gck_parents *);
struct gck_ptab;
const struct gck_ptab *gck_parents_ptab(const struct gck_parents *);
int	gck_parents_use_pages(struct gck_parents *, const struct gck_ptab *);
void	gck_parents_set_bases(struct gck_parents *,
	    const struct gck_parents *);
int	gck_parents_assemble(struct gck_parents *, const char *, const char *,
	    size_t, const char *, uint64_t, uint64_t, char **, size_t *);
int	gck_parents_stands_on(const struct gck_parents *, size_t,
	    const char *);
int	gck_parents_pages(struct gck_parents *, const struct gck_digest *,
	    uint64_t, const uint32_t *, char *const *, size_t);
int	gck_parents_assemble_any(const struct gck_parents *, const char *,
	    const char *, size_t, const char *, uint64_t, uint64_t, char **,
	    size_t *);

#endif /* GCK_IMAGE_PARENT_H */
