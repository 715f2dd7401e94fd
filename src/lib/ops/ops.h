#ifndef GCK_OPS_OPS_H
#define GCK_OPS_OPS_H

struct gck_ckpt_opts;
struct gck_ckpt_result;
struct gck_ctx;
struct gck_guard;
struct gck_restore_opts;

/*
 * checkpoint.c, restore.c: the hand-over hooks of gpusend.
 *
 * A commit hook runs once the image is complete and flushed, before the
 * tree is disposed of.  It returns GCK_OK to go on with *after (which
 * it may change), or a code (its message set on ctx) to roll the tree
 * back.  It may tell the guard what to do should this process die
 * while it waits.
 */
typedef int	(*gck_commit_fn)(struct gck_ctx *, void *, struct gck_guard *,
		    enum gck_after *);
int	gck_checkpoint_ex(struct gck_ctx *, const struct gck_ckpt_opts *,
	    gck_commit_fn, void *, struct gck_ckpt_result *);
/*
 * A ready hook runs once every restored process is there, stopped,
 * before any of them runs.  GCK_OK lets the tree continue; a code (its
 * message set on ctx) has it killed.
 */
typedef int	(*gck_ready_fn)(struct gck_ctx *, void *, pid_t);
int	gck_restore_ex(struct gck_ctx *, const struct gck_restore_opts *,
	    gck_ready_fn, void *, pid_t *);
int	gck_restore_not_init(struct gck_ctx *);

/* precopy.c: a running tree's memory, as chunks, for gpusend --live */
struct gck_parents;
struct gck_precopy_stats {
	uint64_t	 memory;	/* bytes of the chunks read */
	uint64_t	 known;		/* of them, what have holds */
	uint64_t	 stored;	/* of them, written */
	size_t		 chunks;	/* written */
};
struct gck_memo;
struct gck_ptab;
int	gck_precopy(struct gck_ctx *, pid_t, int, int, struct gck_parents *,
	    struct gck_memo *, struct gck_ptab *, struct gck_precopy_stats *);

/*
 * snapshot.c: a snapshot's memory read while the tree runs, in rounds
 * (gck_snap_rounds(): *poolp, their images, with those of parent, for
 * the image made stopped to refer to); and that image, once the tree
 * runs again, written out whole (gck_snap_write(), which takes the
 * digests of the chunks the rounds read from their memo).  Both return
 * GCK_OK or a code.
 */
#define GCK_SNAP_LEVEL	1	/* the rounds' compression, and the stop's */
int	gck_snap_rounds(struct gck_ctx *, pid_t, const char *, const char *,
	    struct gck_memo *, struct gck_parents **);
int	gck_snap_write(struct gck_ctx *, int, struct gck_parents *,
	    struct gck_memo *, const struct gck_ckpt_opts *,
	    const struct gck_parents *, int, uint64_t *, uint64_t *);

/*
 * request.c: the requests of a snapshot now that wait in a series'
 * directory, taken as a snapshot begins and answered once it is listed
 * (r GCK_OK, name its name) or has failed (why on ctx).
 */
void	gck_requests_take(const char *, char ***, size_t *);
void	gck_requests_answer(struct gck_ctx *, const char *, char **, size_t,
	    int, const char *);

#endif /* GCK_OPS_OPS_H */
