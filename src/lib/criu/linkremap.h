#ifndef GCK_CRIU_LINKREMAP_H
#define GCK_CRIU_LINKREMAP_H

struct gck_capture;
struct gck_ctx;

/* linkremap.c: criu's links of files whose name is gone, made ghosts */
int	gck_link_remaps(struct gck_ctx *, struct gck_capture *, pid_t, int,
	    uint64_t, size_t *, size_t *);

#endif /* GCK_CRIU_LINKREMAP_H */
