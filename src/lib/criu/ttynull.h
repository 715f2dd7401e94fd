#ifndef GCK_CRIU_TTYNULL_H
#define GCK_CRIU_TTYNULL_H

struct gck_capture;
struct gck_ctx;

/* ttynull.c: the terminals of a tree, in its image, become /dev/null */
int	gck_ttys_to_null(struct gck_ctx *, struct gck_capture *, size_t *);

#endif /* GCK_CRIU_TTYNULL_H */
