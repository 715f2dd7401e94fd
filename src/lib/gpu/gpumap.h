#ifndef GCK_GPU_GPUMAP_H
#define GCK_GPU_GPUMAP_H

struct gck_ctx;
struct gck_gpu;
struct gck_mcuda;

/* gpumap.c: where an image's GPUs go */
int	gck_gpumap_plan(struct gck_ctx *, const struct gck_mcuda *,
	    const struct gck_gpu *, size_t, const char *, int *, int *);
int	gck_gpumap_host(struct gck_ctx *, const struct gck_gpu *, size_t,
	    const char *, unsigned char [][2][16], unsigned int *);

#endif /* GCK_GPU_GPUMAP_H */
