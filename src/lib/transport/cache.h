#ifndef GCK_TRANSPORT_CACHE_H
#define GCK_TRANSPORT_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct gck_ctx;
struct gck_cache;
struct gck_parents;

/* cache.c: a receiver's cache of the images it restored */
int	gck_cache_open(struct gck_ctx *, const char *, uint64_t,
	    struct gck_cache **);
struct gck_parents *gck_cache_pool(struct gck_cache *);
int	gck_cache_spool(struct gck_cache *);
void	gck_cache_write(struct gck_cache *, const void *, size_t);
int	gck_cache_kept(const struct gck_cache *);
int	gck_cache_reopen(struct gck_cache *);
void	gck_cache_commit(struct gck_cache *);
const char *gck_cache_drop_bad(struct gck_cache *);
void	gck_cache_free(struct gck_cache *);

#endif /* GCK_TRANSPORT_CACHE_H */
