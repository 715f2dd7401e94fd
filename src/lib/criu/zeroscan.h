#ifndef GCK_CRIU_ZEROSCAN_H
#define GCK_CRIU_ZEROSCAN_H

struct gck_area;
struct gck_capture;
struct gck_ctx;
struct gck_nsview;
struct gck_sfile;

/* zeroscan.c: the zero pages of private anonymous memory, left out */
#define GCK_ZERO_HEAD	64	/* bytes of a page looked at first */

/* A task's pages without the zero pages left out. */
struct gck_zero {
	char		*pagemap;	/* its pagemap rewritten, or NULL */
	size_t		 len;
	uint64_t	 size;		/* bytes of pages kept */
	uint64_t	 dropped;	/* bytes of zero pages left out */
};

int	gck_zero_pages(struct gck_ctx *, const struct gck_sfile *,
	    const struct gck_sfile *, const struct gck_sfile *, pid_t,
	    const struct gck_area *, size_t, size_t, struct gck_zero *);
int	gck_zero_scan(struct gck_ctx *, struct gck_capture *,
	    const struct gck_nsview *, uint64_t *);

#endif /* GCK_CRIU_ZEROSCAN_H */
