#ifndef GCK_IMAGE_DEVFILL_H
#define GCK_IMAGE_DEVFILL_H

#include <stddef.h>
#include <stdint.h>

struct gck_cproc;
struct gck_ctx;
struct gck_cuda;
struct gck_devfill;
struct gck_manifest;
struct gck_parents;
struct gck_taker;

/*
 * devfill.c: a restore gives the device memory that went through custom
 * storage to its GPUs on every CPU.
 */
int	gck_devfill_index(struct gck_ctx *, const struct gck_manifest *,
	    const struct gck_parents *, struct gck_devfill **);
int	gck_devfill_plan(struct gck_ctx *, const struct gck_manifest *,
	    struct gck_cuda *, struct gck_cproc *, size_t,
	    struct gck_devfill **);
void	gck_devfill_frames(const struct gck_devfill *, const uint64_t **,
	    const uint64_t **, size_t *);
const struct gck_taker *gck_devfill_taker(struct gck_devfill *);
void	gck_devfill_counts(const struct gck_devfill *, size_t *, size_t *);
int	gck_devfill_finish(struct gck_devfill *);
void	gck_devfill_free(struct gck_devfill *);
int	gck_devfill_dir(struct gck_ctx *, const struct gck_manifest *,
	    struct gck_cuda *, struct gck_cproc *, size_t, int, const char *);

#endif /* GCK_IMAGE_DEVFILL_H */
