#ifndef GCK_IMAGE_ZIO_H
#define GCK_IMAGE_ZIO_H

#include "image/digest.h"

struct gck_ctx;
struct gck_zin;

/*
 * What a decompressing worker found in a frame that holds one tar entry:
 * where its data starts in the frame, its size and its digest; and
 * whether it handed the data on to a taker (image.h), and if that
 * failed.  For a reference to a parent's chunk (size and digest those of
 * the chunk): the chunk's data, read and checked, owned by the zin
 * until taken (gck_zin_take()) or given to the discard function.
 */
struct gck_zres {
	int		 ok;
	uint64_t	 data_off, size;
	struct gck_digest d;
	int		 taken, terr;
	char		*ref;		/* a reference's chunk, fetched */
	size_t		 refcap;	/* in a buffer that large */
	size_t		 refimg;	/* from this parent image */
};
typedef void	 gck_zexamine(void *, const char *, size_t, struct gck_zres *);
typedef void	 gck_zdiscard(void *, struct gck_zres *);
struct gck_zout;

/* zio.c: the compression layer under the tar layer */
struct gck_zout;
struct gck_zin;
int	gck_zio_cpus(void);
int	gck_zout_new(struct gck_ctx *, int, int, int, struct gck_zout **);
int	gck_zout_write(struct gck_zout *, const void *, size_t);
int	gck_zout_frame_end(struct gck_zout *);
int	gck_zout_sync(struct gck_zout *);
int	gck_zout_put_frame(struct gck_zout *, const void *, size_t);
uint64_t gck_zout_frames(const struct gck_zout *);
uint64_t gck_zout_bytes(const struct gck_zout *);
int	gck_zout_frame(const struct gck_zout *, uint64_t, uint64_t *,
	    uint64_t *);
void	gck_zout_set_footer(struct gck_zout *);
int	gck_zout_footer(const struct gck_zout *);
int	gck_zout_finish(struct gck_zout *);
int	gck_zio_footer(int, uint64_t, uint64_t *);
size_t	gck_zio_footer_len(void);
void	gck_zout_free(struct gck_zout *);
int	gck_zin_new(struct gck_ctx *, int, struct gck_zin **);
void	gck_zin_set_threads(struct gck_zin *, int);
void	gck_zin_set_ahead(struct gck_zin *, int);
void	gck_zin_set_examine(struct gck_zin *, gck_zexamine *, gck_zdiscard *,
	    void *);
int	gck_zin_result(const struct gck_zin *, uint64_t, struct gck_zres *);
int	gck_zin_take(struct gck_zin *, uint64_t, struct gck_zres *);
ssize_t	gck_zin_next(struct gck_zin *, const void **, size_t);
ssize_t	gck_zin_read(struct gck_zin *, void *, size_t);
uint64_t gck_zin_frames(const struct gck_zin *);
int	gck_zin_compressed(const struct gck_zin *);
uint64_t gck_zin_total(const struct gck_zin *);
uint64_t gck_zin_inbytes(const struct gck_zin *);
uint64_t gck_zin_zero_tail(const struct gck_zin *);
int	gck_zin_eof(const struct gck_zin *);
void	gck_zin_cur_frame(const struct gck_zin *, uint64_t *, uint64_t *);
int	gck_zin_footer(const struct gck_zin *, uint64_t *);
int	gck_zin_zero_range(const struct gck_zin *, uint64_t, uint64_t);
int	gck_zin_peek(const struct gck_zin *, uint64_t, void *, size_t);
void	gck_zin_keep_raw(struct gck_zin *);
int	gck_zin_set_index(struct gck_zin *, const uint64_t *,
	    const uint64_t *, size_t);
int	gck_zin_spool(struct gck_zin *, int);
void	gck_zin_nospool(struct gck_zin *);
void	gck_zin_free(struct gck_zin *);

#endif /* GCK_IMAGE_ZIO_H */
