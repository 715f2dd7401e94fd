#ifndef GCK_IMAGE_IMAGE_H
#define GCK_IMAGE_IMAGE_H

struct gck_digest;
struct gck_parents;
struct gck_reader;
struct gck_writer;

/*
 * A taker of the data of some entries, as the reader meets it: the
 * decompressing workers hand it the data of the frames they digest, the
 * reader's own thread that of the entries no worker handed on; either
 * way before the reader has checked the entry.  begin(arg, name) says
 * whether it takes entry name, with a handle for take(arg, handle,
 * offset in the entry, data, length), which returns 0 or -1 (failed).
 * begin() and take() run on any thread.  Once the reader has checked an
 * entry it calls accepted(arg, name, its digest, the bytes of data it
 * holds, by) on its own thread, by one of GCK_TAKEN_*; a code it
 * returns (its message on the reader's context) fails the read.
 * A taker that is checked takes only data checked against its digest:
 * a worker's, once the frame's digest is that its header gives; the
 * reader's thread hands it the whole entry at once (holes as zeros),
 * once it has checked it, just before accepted().  A worker keeps such
 * an entry in a buffer of buf_get(arg, its length), if there is one
 * (NULL: none, or none at hand), given back by buf_put(arg, it) after
 * take(); else in one of its own.  Both run on any thread.
 */
#define GCK_TAKEN_NONE		0	/* not handed on */
#define GCK_TAKEN_WORKER	1	/* all of it, by the worker */
#define GCK_TAKEN_READER	2	/* all of it, by the reader */
#define GCK_TAKEN_FAILED	3	/* a take() failed */
#define GCK_EK_DATA	0	/* an entry that holds its data */
#define GCK_EK_REF	1	/* a reference to a parent's chunk */
#define GCK_EK_PATCH	2	/* a patch of parents' chunks */

struct gck_taker {
	void	*(*begin)(void *, const char *);
	int	 (*take)(void *, void *, uint64_t, const void *, size_t);
	int	 (*accepted)(void *, const char *, const struct gck_digest *,
		    uint64_t, int);
	void	*arg;
	int	 checked;
	void	*(*buf_get)(void *, size_t);	/* or NULL */
	void	 (*buf_put)(void *, void *);
};

/* image.c: what the streamers need of the reader and writer */
int	gck_reader_file(struct gck_reader *, char *, size_t, uint64_t *);
ssize_t	gck_reader_file_read(struct gck_reader *, void *, size_t);
ssize_t	gck_reader_file_chunk(struct gck_reader *, const void **, size_t,
	    int *);
ssize_t	gck_reader_file_entry(struct gck_reader *, void *, size_t);
int	gck_reader_file_seen(struct gck_reader *, const char *);
void	gck_reader_keep_raw(struct gck_reader *);
int	gck_reader_spool(struct gck_reader *, int);
void	gck_reader_nospool(struct gck_reader *);
struct gck_ptab;
int	gck_writer_pages(const struct gck_writer *, struct gck_ptab *);
int	gck_writer_add_memory(struct gck_writer *, const char *, const void *,
	    size_t);
int	gck_writer_add_memory_ref(struct gck_writer *, const char *,
	    const struct gck_digest *, size_t, const unsigned char *);
int	gck_writer_add_pages(struct gck_writer *, const char *, const void *,
	    size_t);
int	gck_writer_add_memory_whole(struct gck_writer *, const char *,
	    const void *, size_t, const struct gck_digest *);
int	gck_writer_add_memory_frame(struct gck_writer *, const char *, size_t,
	    const struct gck_digest *, const unsigned char *, const void *,
	    size_t, int (*)(void *, const uint32_t *, char *const *, size_t),
	    void *);
int	gck_writer_takes_frames(const struct gck_writer *, int, int);
int	gck_writer_sync(struct gck_writer *);
int	gck_writer_entry(struct gck_writer *, size_t, uint64_t *,
	    struct gck_digest *, uint64_t *, uint64_t *);
const unsigned char *gck_writer_page_digests(const struct gck_writer *,
	    uint64_t *);
void	gck_writer_stats(const struct gck_writer *, uint64_t *, uint64_t *);
void	gck_writer_counts(const struct gck_writer *, uint64_t *, uint64_t *);
uint64_t gck_reader_inbytes(const struct gck_reader *);
int	gck_writer_new2(struct gck_ctx *, int, int, size_t, int, int,
	    struct gck_writer **);
void	gck_reader_set_threads(struct gck_reader *, int);
void	gck_reader_no_ahead(struct gck_reader *);
void	gck_reader_no_fetch(struct gck_reader *);
void	gck_reader_copy_stats(const struct gck_reader *, uint64_t *,
	    uint64_t *);
void	gck_reader_set_parents(struct gck_reader *, struct gck_parents *);
void	gck_reader_set_taker(struct gck_reader *, const struct gck_taker *);
int	gck_reader_set_frames(struct gck_reader *, const uint64_t *,
	    const uint64_t *, size_t);
void	gck_writer_set_parents(struct gck_writer *,
	    const struct gck_parents *);
uint64_t gck_writer_refbytes(const struct gck_writer *);
int	gck_writer_set_sign(struct gck_writer *, const char *);
int	gck_reader_expect(struct gck_reader *, const char *, size_t);
struct gck_ctx *gck_reader_ctx(const struct gck_reader *);
void	gck_reader_signature(const struct gck_reader *, const char **,
	    size_t *, const char **, size_t *);
struct gck_memo;
void	gck_writer_set_memo(struct gck_writer *, struct gck_memo *);
int	gck_reader_copy(struct gck_reader *, struct gck_writer *);
int	gck_zero_page(const char *, size_t);
void	gck_pages_digest(const char *, size_t, unsigned char *,
	    unsigned char *);

#endif /* GCK_IMAGE_IMAGE_H */
