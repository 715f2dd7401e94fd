#ifndef GCK_CORE_GUARD_H
#define GCK_CORE_GUARD_H

struct gck_ctx;
struct gck_guard;
struct gck_proc;
struct gck_ptree;

/* guard.c: resumes (or settles) the tree should gpuckpt be killed */
/*
 * Brings the processes back onto their GPUs, called in the guard with
 * the work directory's name (its spool of device memory is beside it).
 */
typedef void	(*gck_guard_gpu_fn)(struct gck_ctx *, const struct gck_proc *,
		    size_t, const char *);
int	gck_guard_start(struct gck_ctx *, const struct gck_ptree *,
	    const char *, const char *, gck_guard_gpu_fn,
	    const struct gck_proc *, size_t, struct gck_guard **);
void	gck_guard_intent(struct gck_guard *, char);
void	gck_guard_tree(struct gck_guard *, pid_t);
void	gck_guard_criu(struct gck_guard *, pid_t);
int	gck_guard_fd(const struct gck_guard *);
pid_t	gck_guard_pid(const struct gck_guard *);
void	gck_guard_free(struct gck_guard *);

#endif /* GCK_CORE_GUARD_H */
