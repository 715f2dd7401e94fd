#ifndef GCK_IMAGE_DEVSPOOL_H
#define GCK_IMAGE_DEVSPOOL_H

#include <sys/types.h>
#include <stdint.h>

struct gck_cuda_spool;
struct gck_writer;

/*
 * devspool.c: device memory that custom storage spooled, as the chunks
 * of an image of format (2 or 3) compressed at level (0: not) on threads
 * threads; the image names the file of a GPU of the process that is pid
 * here by local(arg, pid) (NULL: pid); a chunk its parents have, or pages
 * of, is kept as it is, not compressed.
 */
struct gck_parents;
struct gck_devspool_conf {
	int	  format, level, threads;
	const struct gck_parents *parents;	/* the image's, or NULL */
	pid_t	(*local)(void *, pid_t);
	void	 *arg;
};

void	gck_devspool_ops(const struct gck_devspool_conf *,
	    struct gck_cuda_spool *);
/* What gck_devspool_splice() took how: its segments and chunks. */
struct gck_splice_counts {
	uint64_t	segs;
	uint64_t	whole;	/* as the spool compressed them */
	uint64_t	ref;	/* referred to or patched */
	uint64_t	again;	/* compressed again from their data */
};

int	gck_devspool_splice(struct gck_ctx *, struct gck_writer *,
	    const char *, const char *, uint64_t, uint64_t, uint64_t,
	    struct gck_splice_counts *);

#endif /* GCK_IMAGE_DEVSPOOL_H */
