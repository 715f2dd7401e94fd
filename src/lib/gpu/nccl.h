#ifndef GCK_GPU_NCCL_H
#define GCK_GPU_NCCL_H

#include <sys/types.h>

struct gck_ctx;
struct gck_cut;
struct gck_nccl;
struct gck_proc;

/*
 * nccl.c: the ranks of an NCCL job that take part (libgpuckpt-nccl.so,
 * src/nccl/), quiesced before their GPUs are locked and resumed after.
 *
 * gck_nccl_find() finds the ranks among pids (*qp NULL where there is
 * none).  gck_nccl_quiesce() holds them all, parks them at one count of
 * NCCL operations and has them tear their communicators down, within
 * timeout_ms; on a failure none is left held (those torn down already
 * are rebuilt) and the message says why.  A rank torn down that hears
 * nothing more for lease_s seconds rebuilds by itself (0: it waits).
 * With a cut (core/cut.h) the ranks of every host of it are one job:
 * each host's counts are posted and the others' taken in at each step,
 * the target and the checks are the whole job's, and a failure here is
 * posted for the other hosts to let theirs go.  gck_nccl_find() gives
 * a set with no rank where there is none, gck_nccl_count() 0.  gck_nccl_resume() has every
 * rank rebuild and run on, waiting timeout_ms at most for them: after a
 * checkpoint, its rollback, or a restore.  Both return GCK_OK or a
 * code.  gck_nccl_settle() is the resume of a rollback: nothing done
 * unless the ranks were quiesced, no context to set; why (if not NULL)
 * gets the message of a failure.
 */
#define GCK_NCCL_TIMEOUT_MS	30000	/* default quiesce timeout */
#define GCK_NCCL_RESUME_MS	300000	/* a rebuild, at the most */
#define GCK_NCCL_LEASE_S	600	/* a checkpoint's ranks, no one back */

int	gck_nccl_find(struct gck_ctx *, const pid_t *, size_t,
	    struct gck_nccl **);
int	gck_nccl_find_procs(struct gck_ctx *, const struct gck_proc *, size_t,
	    struct gck_nccl **);
size_t	gck_nccl_count(const struct gck_nccl *);
int	gck_nccl_quiesce(struct gck_ctx *, struct gck_nccl *, unsigned int,
	    unsigned int, struct gck_cut *);
int	gck_nccl_resume(struct gck_ctx *, struct gck_nccl *, unsigned int);
int	gck_nccl_quiesced(const struct gck_nccl *);
int	gck_nccl_settle(struct gck_nccl *, char *, size_t);
void	gck_nccl_free(struct gck_nccl *);

#endif /* GCK_GPU_NCCL_H */
