#ifndef GCK_IMAGE_IMAGE_H
#define GCK_IMAGE_IMAGE_H

struct gck_parents;
struct gck_reader;
struct gck_writer;

/* image.c: what the streamers need of the reader and writer */
int	gck_reader_file(struct gck_reader *, char *, size_t, uint64_t *);
ssize_t	gck_reader_file_read(struct gck_reader *, void *, size_t);
ssize_t	gck_reader_file_chunk(struct gck_reader *, const void **, size_t,
	    int *);
int	gck_reader_file_seen(struct gck_reader *, const char *);
void	gck_reader_keep_raw(struct gck_reader *);
int	gck_reader_spool(struct gck_reader *, int);
void	gck_reader_nospool(struct gck_reader *);
int	gck_writer_add_pages(struct gck_writer *, const char *, const void *,
	    size_t);
void	gck_writer_stats(const struct gck_writer *, uint64_t *, uint64_t *);
int	gck_writer_new2(struct gck_ctx *, int, int, size_t, int, int,
	    struct gck_writer **);
void	gck_reader_set_threads(struct gck_reader *, int);
void	gck_reader_set_parents(struct gck_reader *, struct gck_parents *);
void	gck_writer_set_parents(struct gck_writer *,
	    const struct gck_parents *);
uint64_t gck_writer_refbytes(const struct gck_writer *);
int	gck_reader_copy(struct gck_reader *, struct gck_writer *);

#endif /* GCK_IMAGE_IMAGE_H */
