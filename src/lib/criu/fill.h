#ifndef GCK_CRIU_FILL_H
#define GCK_CRIU_FILL_H

struct gck_ctx;
struct gck_fill;
struct gck_manifest;
struct gck_parents;
struct gck_sfile;
struct gck_taker;

/*
 * fill.c: a restore from an image file writes the private memory of its
 * processes in place itself, on every CPU, rather than through criu.
 */
int	gck_fill_plan(struct gck_ctx *, const struct gck_manifest *,
	    struct gck_parents *, struct gck_parents *,
	    const struct gck_sfile *, size_t, struct gck_fill **);
size_t	gck_fill_nfiles(const struct gck_fill *);
void	gck_fill_file(struct gck_fill *, size_t, const char **, char **,
	    size_t *, const char **, char **, size_t *);
void	gck_fill_frames(const struct gck_fill *, const uint64_t **,
	    const uint64_t **, size_t *);
const struct gck_taker *gck_fill_taker(struct gck_fill *);
void	gck_fill_arm(struct gck_fill *, const pid_t *);
int	gck_fill_finish(struct gck_fill *);
void	gck_fill_stats(const struct gck_fill *, uint64_t *, uint64_t *);
void	gck_fill_free(struct gck_fill *);

#endif /* GCK_CRIU_FILL_H */
