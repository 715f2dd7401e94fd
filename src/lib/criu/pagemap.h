#ifndef GCK_CRIU_PAGEMAP_H
#define GCK_CRIU_PAGEMAP_H

struct gck_capture;
struct gck_ctx;
struct gck_pmread;
struct gck_sfile;

/* pagemap.c: a task's memory, as its pagemap image lists it */
#define GCK_IMG_COMMON_MAGIC	0x54564319u	/* CRIU's image header */
const uint8_t *gck_img_record(const char *, size_t, size_t *, uint32_t *,
	    int *);
struct gck_pmread;

int	gck_pmread_open(struct gck_ctx *, const struct gck_sfile *,
	    const struct gck_sfile *, struct gck_pmread **);
ssize_t	gck_pmread_read(struct gck_pmread *, void *, size_t);
int	gck_pmread_error(const struct gck_pmread *);
int	gck_pmread_overlaps(const struct gck_pmread *, uint64_t, uint64_t,
	    uint64_t, uint64_t);

struct gck_area {
	uint64_t	addr, size;
};

int	gck_rseq_areas(struct gck_ctx *, const struct gck_capture *, pid_t,
	    struct gck_area **, size_t *);
void	gck_pmread_free(struct gck_pmread *);

#endif /* GCK_CRIU_PAGEMAP_H */
